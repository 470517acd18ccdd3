/// A sensor unit test's own failure (a frame that should have decoded, a hex that does not parse).
struct ReferenceError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
