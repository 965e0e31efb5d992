import Testing

/// The tests on real sockets run one at a time: a flood or a stream of megabytes keeps the event loops busy, and
/// the deadlines the others check are timed on the same loops.
@Suite(.serialized) struct NetworkTests {}
