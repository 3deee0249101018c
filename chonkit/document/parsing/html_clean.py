"""What of an HTML page is its content: the one cleaner of uploaded HTML and of web pages.

Documentation generators wrap each page in chrome a reader never reads as text: a hidden keyboard-help popup, a
theme menu, a search box, a sidebar table of contents, prev/next bars. Left in, it becomes the first chunk of every
page and matches questions it cannot answer. Chrome is recognised by what the markup says it is, never by a
generator's class names:

- the page's ``<main>`` (or ``role=main``), when it marks one, is all that is read: the spec defines it as the
  page's dominant content, and it leaves out whatever a generator puts around it;
- hidden elements (``hidden``, ``aria-hidden="true"``, an inline ``display: none`` or ``visibility: hidden``);
- controls and widgets: buttons, inputs, selects, dialogs, and the ARIA roles of navigation, menus, search
  boxes, dialogs and tooltips;
- the page's own ``header`` and ``footer`` (their implicit roles are banner and contentinfo) and its asides
  (complementary), not those of an article or section, which HTML-AAM maps to no role (docutils' footnotes
  and sidebars are asides in a section);
- a section's permalink marker (a link to ``#...`` whose text has no letter or digit, like Sphinx's ``¶``);
- any other block made mostly of links (:data:`LINK_DENSITY`): tables of contents and prev/next bars, whatever
  they are called. A page that is nothing but links (an index page) keeps them all. The links in a heading that
  has words of its own are its words (:data:`_HEADINGS`).

Headings, tables, code and figures are never left out for their links; they go only inside a block that does.
"""

from __future__ import annotations

from collections.abc import Callable

from selectolax.lexbor import LexborHTMLParser, LexborNode

LINK_DENSITY = 0.5
"""Share of a block's words inside links above which the block is navigation, not prose. Prose cites a link or
two in a sentence; a table of contents or a prev/next bar is little else than its links. Words, not characters:
a cited URL or setting name is one long link in a sentence, not a menu."""

_HIDDEN = (
    '[hidden], [aria-hidden="true" i], [style*="display:none" i], [style*="display: none" i], '
    '[style*="visibility:hidden" i], [style*="visibility: hidden" i]'
)
_CONTROLS = (
    "button, input, select, textarea, dialog, iframe, object, embed, svg, canvas, menu, "
    "[role=navigation], [role=menu], [role=menubar], [role=listbox], [role=search], [role=dialog], "
    "[role=alertdialog], [role=tooltip], [role=banner], [role=contentinfo], [role=complementary], nav"
)
# not ``form``: ASP.NET pages hold their whole body in one; a search form is left empty by its inputs' going
_NOT_TEXT = frozenset({"script", "style", "noscript", "template", "head", "-comment", "!doctype"})
_SECTIONS = frozenset({"article", "aside", "main", "nav", "section"})
"""A ``header`` or ``footer`` inside one of these belongs to it (an article's byline), not to the page's chrome."""
_LINK_BLOCKS = frozenset({"div", "section", "aside", "header", "footer", "ul", "ol", "dl", "center", "details"})
"""The blocks the link measure weighs: not a paragraph, whose links are a sentence's citations, nor a heading,
table, code or figure (a table of links is still a table)."""
_CODE = frozenset({"code", "pre", "kbd", "samp", "tt"})
"""A link inside code is a cross-referenced name in an expression, counted as the code's words, not a link."""
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
"""A heading with words of its own outside links names what follows (``fn parse(self, tokens: TokenStream)``,
``Trait syn::parse::Parser``): its links cross-reference the name's parts and count as its words, so the block
holding it and a "source" link is not navigation. A heading made only of links is a table of contents' entry."""


def readable(tree: LexborHTMLParser) -> tuple[LexborNode | None, list[LexborNode]]:
    """The element whose content is read (the page's ``<main>``, else its body) and the elements inside it that
    are left out (some may be nested in others)."""
    body = tree.body
    if body is None:
        return None, []
    markup = {node.mem_id for node in (*tree.css(_HIDDEN), *tree.css(_CONTROLS))}
    root = _main(tree, body, markup)
    markup.update(node.mem_id for node in tree.css("header, footer") if not _inside(node, _SECTIONS))
    markup.update(node.mem_id for node in tree.css("aside:not([role])") if not _inside(node, _SECTIONS - {"main"}))
    return root, _LeftOut(markup).find(root)


def left_out_ids(tree: LexborHTMLParser) -> tuple[LexborNode | None, set[int]]:
    """:func:`readable`, with the left-out elements as the ``mem_id`` set a walk skips."""
    root, nodes = readable(tree)
    return root, {node.mem_id for node in nodes}


def _main(tree: LexborHTMLParser, body: LexborNode, hidden: set[int]) -> LexborNode:
    for node in tree.css("main, [role=main]"):
        if not _inside_ids(node, hidden) and node.mem_id not in hidden and node.text(deep=True).strip():
            return node
    return body


class _LeftOut:
    """One walk over the tree: elements left out by their markup, then the blocks made mostly of links.

    Each block's words are summed on the way back up, so the walk is linear in the tree, at any depth. A block
    left out for its links does not count towards its parent's measure: the parent is weighed on what stays of it.
    """

    def __init__(self, markup: set[int]) -> None:
        self._markup = markup
        self._by_markup: list[LexborNode] = []
        self._by_links: list[LexborNode] = []
        self._frames: list[_Frame] = []
        self._in_link = self._in_code = self._dropped_words = 0

    def find(self, root: LexborNode) -> list[LexborNode]:
        self._frames = [_Frame(root, link=False)]
        walk(root, self._enter, lambda _: self._exit())
        return self._result()

    def _enter(self, node: LexborNode) -> bool:
        tag = node.tag or ""
        if tag == "-text":
            words = _words(node.text_content or "")
            self._frames[-1].words += words
            self._frames[-1].link_words += words if self._in_link else 0
            return False
        if tag in _NOT_TEXT:
            return False
        if node.mem_id in self._markup or _is_permalink(tag, node):
            self._by_markup.append(node)
            return False
        link = _is_link(tag, node) and not self._in_code
        self._in_link += link
        self._in_code += tag in _CODE
        self._frames.append(_Frame(node, link=link))
        return True

    def _exit(self) -> None:
        frame = self._frames.pop()
        tag = frame.element.tag or ""
        self._in_link -= frame.link
        self._in_code -= tag in _CODE
        if tag in _HEADINGS and frame.link_words < frame.words:
            frame.link_words = frame.links = 0
        if tag in _LINK_BLOCKS and frame.links >= 2 and frame.link_words > LINK_DENSITY * frame.words:
            self._by_links.append(frame.element)
            self._dropped_words += frame.words
            return
        parent = self._frames[-1]
        parent.words += frame.words
        parent.link_words += frame.link_words
        parent.links += frame.links

    def _result(self) -> list[LexborNode]:
        if self._frames[0].words == 0 and self._dropped_words > 0:  # a page of links only: they are its content
            return self._by_markup
        return self._by_markup + self._by_links


class _Frame:
    """An open element's words so far, those inside links, and its links."""

    __slots__ = ("element", "link", "link_words", "links", "words")

    def __init__(self, element: LexborNode, *, link: bool) -> None:
        self.element = element
        self.link = link
        self.words = self.link_words = 0
        self.links = int(link)


def remove(nodes: list[LexborNode]) -> None:
    """Remove ``nodes`` from their tree: the outermost of nested ones, each once, all found before any is freed."""
    ids = {node.mem_id for node in nodes}
    unique = {node.mem_id: node for node in nodes}.values()
    outermost = [node for node in unique if not _inside_ids(node, ids)]
    for node in outermost:
        node.decompose()


def _is_link(tag: str, node: LexborNode) -> bool:
    return tag == "a" and node.attributes.get("href") is not None


def _is_permalink(tag: str, node: LexborNode) -> bool:
    if tag != "a" or not (node.attributes.get("href") or "").startswith("#"):
        return False
    return not any(char.isalnum() for char in node.text(deep=True))


def _words(text: str) -> int:
    return sum(1 for word in text.split() if any(char.isalnum() for char in word))


def _inside(node: LexborNode, tags: frozenset[str]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.tag in tags:
            return True
        parent = parent.parent
    return False


def _inside_ids(node: LexborNode, ids: set[int]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.mem_id in ids:
            return True
        parent = parent.parent
    return False


def walk(root: LexborNode, enter: Callable[[LexborNode], bool], leave: Callable[[LexborNode], None]) -> None:
    """Visit ``root``'s descendants in document order without recursion (a page may nest deeper than Python's
    stack): ``enter`` a node, and unless it says ``False`` its children, then ``leave`` it."""
    root_id = root.mem_id
    node = root.first_child
    while node is not None:
        entered = enter(node)
        child = node.first_child if entered else None
        if child is not None:
            node = child
            continue
        if entered:
            leave(node)
        while (sibling := node.next) is None:
            parent = node.parent
            if parent is None or parent.mem_id == root_id:
                return
            node = parent
            leave(node)
        node = sibling
