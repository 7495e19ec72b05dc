"""Reading the pages the tests get: elements with their attributes, and the text inside each id."""

from dataclasses import dataclass, field
from html.parser import HTMLParser

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    text: str = ""
    children: list["Element"] = field(default_factory=list)

    def has(self, name: str) -> bool:
        """True if the element carries the attribute (boolean attributes included)."""
        return name in self.attrs


class Page(HTMLParser):
    """A parsed HTML page; `page.find("input", name="email")`, `page.by_id("x").text`."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        element = Element(tag, dict(attrs))
        if self._open:
            self._open[-1].children.append(element)
        self.elements.append(element)
        if tag not in _VOID:
            self._open.append(element)

    def handle_endtag(self, tag):
        for position in range(len(self._open) - 1, -1, -1):
            if self._open[position].tag == tag:
                del self._open[position:]
                return

    def handle_data(self, data):
        for element in self._open:
            element.text += data

    def find_all(self, tag: str | None = None, **attrs) -> list[Element]:
        """Elements of `tag` (any if None) whose attributes have these values (`class_` for class)."""
        wanted = {_attribute(key): value for key, value in attrs.items()}
        return [
            e for e in self.elements
            if (tag is None or e.tag == tag) and all(e.attrs.get(k) == v for k, v in wanted.items())
        ]

    def find(self, tag: str | None = None, **attrs) -> Element:
        """The one element that matches; AssertionError if none or several."""
        found = self.find_all(tag, **attrs)
        assert len(found) == 1, f"expected one <{tag}> with {attrs}, found {len(found)}"
        return found[0]

    def by_id(self, element_id: str) -> Element:
        """The element with this id."""
        return self.find(None, id=element_id)

    def text(self) -> str:
        """All the text of the page, whitespace collapsed."""
        body = next((e for e in self.elements if e.tag == "html"), None)
        return " ".join((body.text if body else "").split())


def _attribute(keyword: str) -> str:
    # Keyword arguments to HTML attribute names: class_ -> class, aria_invalid -> aria-invalid.
    if keyword in {"class_", "for_"}:
        return keyword[:-1]
    return keyword.replace("_", "-")
