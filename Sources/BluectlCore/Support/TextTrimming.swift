extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (and newlines
    /// when `newlines`): what Foundation's `trimmingCharacters(in:)` did,
    /// without linking all of Foundation for it.
    package func trimmingWhitespace(newlines: Bool = false) -> String {
        let isBlank: (Character) -> Bool = { $0.isWhitespace && (newlines || !$0.isNewline) }
        guard let first = firstIndex(where: { !isBlank($0) }) else { return "" }
        let last = lastIndex(where: { !isBlank($0) })!
        return String(self[first...last])
    }
}
