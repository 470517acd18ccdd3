/// The plain shape of a command line — positionals, `--name value` /
/// `--name=value` options and `--flag`s, each at most once — for the
/// commands scripts call thousands of times (`read`). ArgumentParser's
/// reflection over a command's options costs more instructions than all of a
/// one-shot read's D-Bus work (Figures in the README); a command line of
/// this shape is filled in directly instead. Anything else (help, short
/// names, `--`, a repeated or unknown option, a value that starts with "-")
/// is nil, and ArgumentParser parses it as always, with its own messages.
struct PlainArguments {
    private(set) var positionals: [String] = []
    private var values: [String: String] = [:]
    private var flags: [String] = []

    /// Arrays, not sets: a handful of names, and a Set's first use costs more than this whole parse.
    init?(_ arguments: [String], options: [String], flags known: [String]) {
        var i = 0
        while i < arguments.count {
            let argument = arguments[i]
            i += 1
            guard argument.hasPrefix("-") else {
                positionals.append(argument)
                continue
            }
            guard argument.hasPrefix("--"), argument.count > 2 else { return nil }
            let body = argument.dropFirst(2)
            let name: String
            let value: String?
            if let equals = body.firstIndex(of: "=") {
                name = String(body[..<equals])
                value = String(body[body.index(after: equals)...])
            } else {
                name = String(body)
                value = nil
            }
            if known.contains(name) {
                guard value == nil, !flags.contains(name) else { return nil }
                flags.append(name)
            } else if options.contains(name) {
                let given: String
                if let value {
                    given = value
                } else {
                    guard i < arguments.count else { return nil }
                    given = arguments[i]
                    i += 1
                }
                guard !given.hasPrefix("-"), values.updateValue(given, forKey: name) == nil else { return nil }
            } else {
                return nil
            }
        }
    }

    func value(_ name: String) -> String? { values[name] }
    func flag(_ name: String) -> Bool { flags.contains(name) }
}
