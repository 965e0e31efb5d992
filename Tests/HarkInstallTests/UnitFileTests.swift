import Testing

@Suite struct UnitFileTests {
    @Test func placeholder() { #expect(1 + 1 == 2) }
}
