"""The documentation holds together: README.md and the pages under docs/ name only what exists.

Every page under docs/ is linked from README.md or docs/README.md; every relative link (and its #anchor)
resolves; every repository path named in backticks exists; every `make <target>`, `manage.py <command>`,
`python -m <module>`, `npm run <script>` and dotted name of the code (`orders.orders.order_transition`) is
there to be run or read. Each check reports the page and what it names that is missing. Reads files only: no
server, no database.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import re
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
INDEXES = (ROOT / "README.md", DOCS / "README.md")
PAGES = (ROOT / "README.md", *sorted(DOCS.glob("*.md")))

# A word in backticks is a repository path when it starts with one of these folders (then "/") or is one of
# these files; anything else (`/var/lib/...`, `~/.ssh/...`, `access.py`) is not this repository's.
TOP_FOLDERS = (
    ".ci",
    "bench",
    "config",
    "core",
    "deploy",
    "docs",
    "fleet",
    "locale",
    "orders",
    "payments",
    "provisioning",
    "scripts",
    "shop",
    "static",
    "templates",
    "tests",
)
TOP_FILES = (
    "Dockerfile",
    "Makefile",
    "README.md",
    "docker-compose.yml",
    "manage.py",
    "package.json",
    "package-lock.json",
    "pyproject.toml",
)
# The Python packages of the repository: a dotted name in backticks that starts with one is looked up in the code.
PACKAGES = ("bench", "config", "core", "fleet", "orders", "payments", "provisioning", "scripts", "shop", "tests")

FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
MAKE = re.compile(r"(?<![\w./-])make[ \t]+([A-Za-z_][\w.-]*)")
MANAGE = re.compile(r"\bmanage\.py\s+([a-z][a-z0-9_]*)")
PYTHON_M = re.compile(r"\bpython(?:3(?:\.\d+)?)?\s+-m\s+([A-Za-z_][\w.]*)")
NPM_RUN = re.compile(r"\bnpm\s+run\s+([\w:.-]+)")
DOTTED = re.compile(r"^([a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(.*\))?$", re.DOTALL)
HTTP_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}
PLACEHOLDER = re.compile(r"<[^<>/]*>")
BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


# --- reading a page -------------------------------------------------------------------------------------------


def without_fences(text: str) -> str:
    return FENCE.sub("", text)


def fences(text: str) -> list[str]:
    return [match.group(0) for match in FENCE.finditer(text)]


def code_spans(text: str) -> list[str]:
    """The inline code of a page (fenced blocks left out), one string per span, line breaks as spaces."""
    return [" ".join(match.group(2).split()) for match in CODE_SPAN.finditer(without_fences(text))]


def prose(text: str) -> str:
    """The page without its fenced blocks and inline code: where links live."""
    return CODE_SPAN.sub(" ", without_fences(text))


def code(text: str) -> str:
    """Everything a reader would type: inline code and fenced blocks."""
    return "\n".join([*code_spans(text), *fences(text)])


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(without_fences(text)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


# --- what exists -----------------------------------------------------------------------------------------------


@functools.cache
def make_targets() -> frozenset[str]:
    makefile = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"^([A-Za-z0-9_][\w.-]*)[ \t]*:(?!=)", makefile, re.MULTILINE))


@functools.cache
def npm_scripts() -> frozenset[str]:
    return frozenset(json.loads((ROOT / "package.json").read_text()).get("scripts", {}))


def brace_expanded(word: str) -> list[str]:
    match = BRACES.search(word)
    if not match:
        return [word]
    head, tail = word[: match.start()], word[match.end() :]
    return [expanded for part in match.group(1).split(",") for expanded in brace_expanded(head + part + tail)]


def path_exists(path: str) -> bool:
    """A repository path, each `<placeholder>` (or `*`) standing for any name: at least one file matches."""
    pattern = PLACEHOLDER.sub("*", path)
    if "*" in pattern or "?" in pattern:
        return any(ROOT.glob(pattern.rstrip("/")))
    return (ROOT / path).exists()


def module_file(dotted: str) -> Path | None:
    """The file of a module of this repository (`payments.signer` is payments/signer/__init__.py), or None."""
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def top_level_names(module: Path) -> frozenset[str]:
    names = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return frozenset(names)


def python_m_runs(module: str) -> bool:
    """`python -m MODULE` runs: a module file of the repository, a package of it with __main__.py, or an
    installed module (pytest)."""
    if module.split(".")[0] in PACKAGES:
        base = ROOT.joinpath(*module.split("."))
        return base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()
    return importlib.util.find_spec(module) is not None


# --- the checks, each returning what a page names that is missing ------------------------------------------------


def strip_location(word: str) -> str:
    """`payments/scan.py:120`, `docs/operating.md#alerts`, a word's trailing punctuation: the path alone."""
    word = word.strip("(\"'").rstrip(".,;:)\"'")
    word = re.sub(r":\d+(?:-\d+)?$", "", word)
    return word.split("#", 1)[0]


def repository_paths(text: str) -> list[str]:
    paths = []
    for span in code_spans(text):
        if span.split(" ", 1)[0] in HTTP_METHODS:  # `POST orders/<ref>/extend/`: a URL, not a file
            continue
        for word in span.split():
            word = strip_location(word)
            first = word.split("/", 1)[0]
            if (first in TOP_FOLDERS and "/" in word) or word in TOP_FILES:
                paths.append(word)
    return paths


def missing_paths(text: str) -> list[str]:
    return sorted(
        {f"path `{path}`" for path in repository_paths(text) if not all(map(path_exists, brace_expanded(path)))}
    )


def broken_links(text: str, page: Path) -> list[str]:
    problems = []
    for target in LINK.findall(prose(text)):
        if SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            problems.append(f"link ({target}): no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            problems.append(f"link ({target}): no heading #{anchor} in {file.relative_to(ROOT)}")
    return problems


def unknown_make_targets(text: str) -> list[str]:
    targets = make_targets()
    return sorted({f"`make {t}`: no such target in the Makefile" for t in MAKE.findall(code(text)) if t not in targets})


def unknown_commands(text: str) -> list[str]:
    commands = get_commands()
    return sorted({f"`manage.py {name}`: no such command" for name in MANAGE.findall(text) if name not in commands})


def unknown_python_modules(text: str) -> list[str]:
    return sorted({f"`python -m {m}`: no such module" for m in PYTHON_M.findall(text) if not python_m_runs(m)})


def unknown_npm_scripts(text: str) -> list[str]:
    return sorted({f"`npm run {s}`: no such script" for s in NPM_RUN.findall(code(text)) if s not in npm_scripts()})


def is_permission(name: str) -> bool:
    """`orders.manage_personal_data`: an app label and one of its models' permission codenames."""
    label, _, codename = name.partition(".")
    try:
        models = apps.get_app_config(label).get_models()
    except LookupError:
        return False
    return any(
        codename in {code for code, _ in model._meta.permissions}
        or codename in {f"{action}_{model._meta.model_name}" for action in model._meta.default_permissions}
        for model in models
    )


def unknown_dotted_names(text: str) -> list[str]:
    """`orders.orders.order_transition`: the longest prefix that is a module of the repository, then a name
    defined (or imported) at the top of that module. A permission (`orders.manage_personal_data`) is one too."""
    problems = set()
    for span in code_spans(text):
        match = DOTTED.match(span)
        if not match or span.split(".")[0] not in PACKAGES or is_permission(match.group(1)):
            continue
        parts = match.group(1).split(".")
        for cut in range(len(parts), 0, -1):
            module = module_file(".".join(parts[:cut]))
            if module is not None:
                if cut < len(parts) and parts[cut] not in top_level_names(module):
                    problems.add(f"`{span}`: {'.'.join(parts[:cut])} defines no {parts[cut]}")
                break
        else:
            problems.add(f"`{span}`: no such module")
    return sorted(problems)


def problems_of(page: Path) -> list[str]:
    text = page.read_text()
    return [
        *broken_links(text, page),
        *missing_paths(text),
        *unknown_make_targets(text),
        *unknown_commands(text),
        *unknown_python_modules(text),
        *unknown_npm_scripts(text),
        *unknown_dotted_names(text),
    ]


def linked_pages(page: Path) -> set[Path]:
    return {
        (page.parent / target.split("#", 1)[0]).resolve()
        for target in LINK.findall(prose(page.read_text()))
        if not SCHEME.match(target) and not target.startswith("#")
    }


def orphan_pages(docs: Path, indexes: tuple[Path, ...]) -> list[str]:
    """The pages under `docs` that no index links (the docs index itself must be linked from the README)."""
    linked = set().union(*(linked_pages(index) for index in indexes if index.is_file()))
    return [page.name for page in sorted(docs.glob("*.md")) if page.resolve() not in linked]


# --- the tests ---------------------------------------------------------------------------------------------------


def test_there_is_a_docs_index_and_pages():
    assert (DOCS / "README.md").is_file()
    assert len(PAGES) > 2


def test_every_docs_page_is_linked_from_an_index():
    assert orphan_pages(DOCS, INDEXES) == [], "pages under docs/ linked from neither README.md nor docs/README.md"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_reference_on_the_page_exists(page):
    assert problems_of(page) == [], f"{page.relative_to(ROOT)} names what does not exist"


def test_a_broken_reference_of_each_kind_is_reported():
    # Given a page (where docs/ pages live) naming one missing thing of each kind, beside ones that exist
    page = DOCS / "a-page-under-test.md"
    text = "\n".join(
        [
            "# A page",
            "See [operating](operating.md), [nowhere](nowhere.md) and [a section](operating.md#no-such-heading).",
            "The scan is `payments/scan.py:12`; the old one was `payments/scanner.py` and `config/jobs`.",
            "Emails: `templates/emails/<name>/{subject.txt,body.txt}`; `templates/emails/<name>/nothing.txt`.",
            "Run `make test`, then `make deploy`; `manage.py scan_payments`, `python manage.py no_such_command`.",
            "`python -m payments.signer` and `python -m payments.no_signer`; `npm run build:contracts`, "
            "`npm run build:all`.",
            "The writer is `orders.orders.order_transition`, not `orders.orders.order_move` nor `shop.models.Order`.",
            "`POST orders/<ref>/extend/` is a URL; `orders.manage_personal_data` a permission, `shop.eat_cake` none.",
            "```sh",
            "make nothing-here   # a fenced block counts as code too",
            "```",
        ]
    )

    # When its references are checked
    problems = [
        *broken_links(text, page),
        *missing_paths(text),
        *unknown_make_targets(text),
        *unknown_commands(text),
        *unknown_python_modules(text),
        *unknown_npm_scripts(text),
        *unknown_dotted_names(text),
    ]

    # Then exactly the missing ones are reported, each naming what is missing
    assert problems == [
        "link (nowhere.md): no file nowhere.md",
        "link (operating.md#no-such-heading): no heading #no-such-heading in docs/operating.md",
        "path `config/jobs`",
        "path `payments/scanner.py`",
        "path `templates/emails/<name>/nothing.txt`",
        "`make deploy`: no such target in the Makefile",
        "`make nothing-here`: no such target in the Makefile",
        "`manage.py no_such_command`: no such command",
        "`python -m payments.no_signer`: no such module",
        "`npm run build:all`: no such script",
        "`orders.orders.order_move`: orders.orders defines no order_move",
        "`shop.eat_cake`: shop defines no eat_cake",
        "`shop.models.Order`: shop defines no models",
    ]


def test_a_page_no_index_links_is_reported(tmp_path):
    # Given a README linking the docs index, which links one page of two
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("[Docs](docs/README.md)\n")
    (tmp_path / "docs" / "README.md").write_text("- [Linked](linked.md#a-section)\n")
    (tmp_path / "docs" / "linked.md").write_text("# A section\n")
    (tmp_path / "docs" / "forgotten.md").write_text("# Forgotten\n")

    # Then the other page is reported
    assert orphan_pages(tmp_path / "docs", (tmp_path / "README.md", tmp_path / "docs" / "README.md")) == [
        "forgotten.md"
    ]


def test_github_anchors_are_computed_as_github_does():
    text = "# Refunds and sweeps: the signer (`python -m payments.signer`)\n## Faults\n## Faults\n"
    assert anchors(text) == {"refunds-and-sweeps-the-signer-python--m-paymentssigner", "faults", "faults-1"}
