import Testing

@Suite struct PlaceholderTests {
    @Test func placeholder() { #expect(1 + 1 == 2) }
}
