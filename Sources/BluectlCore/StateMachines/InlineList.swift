/// A short list that allocates nothing for up to two elements: none, one or
/// two are held inline, more in an array. What a machine returns for an event
/// that comes by the thousand (a notification's value: one `deliver`), so
/// that the hot path makes no array per event. An array literal makes one.
package struct InlineList<Element: Sendable>: Sendable, Sequence, ExpressibleByArrayLiteral, CustomStringConvertible {
    fileprivate enum Storage: Sendable {
        case none
        case one(Element)
        case two(Element, Element)
        case many([Element])
    }

    fileprivate let storage: Storage

    package init() { storage = .none }

    /// One element, inline.
    package init(_ element: Element) { storage = .one(element) }

    package init(_ elements: [Element]) {
        switch elements.count {
        case 0: storage = .none
        case 1: storage = .one(elements[0])
        case 2: storage = .two(elements[0], elements[1])
        default: storage = .many(elements)
        }
    }

    package init(arrayLiteral elements: Element...) { self.init(elements) }

    package var count: Int {
        switch storage {
        case .none: return 0
        case .one: return 1
        case .two: return 2
        case .many(let elements): return elements.count
        }
    }

    package var isEmpty: Bool { count == 0 }

    /// Hands each element out by moving it: the iterator takes the storage
    /// and keeps only what is left, so an element is not copied (retained
    /// and released) once more per step, as re-reading a copy of the list would.
    package struct Iterator: IteratorProtocol {
        fileprivate var rest: Storage
        fileprivate var index = 0

        package mutating func next() -> Element? {
            let current = rest
            rest = .none
            switch current {
            case .none:
                return nil
            case .one(let first):
                return first
            case .two(let first, let second):
                rest = .one(second)
                return first
            case .many(let elements):
                guard index < elements.count else { return nil }
                defer { index += 1 }
                rest = .many(elements)
                return elements[index]
            }
        }
    }

    package func makeIterator() -> Iterator { Iterator(rest: storage) }

    /// As an array prints (the driver's trace shows a machine's actions so).
    package var description: String { Array(self).description }
}

extension InlineList: Equatable where Element: Equatable {
    package static func == (lhs: InlineList, rhs: InlineList) -> Bool { lhs.elementsEqual(rhs) }
}
