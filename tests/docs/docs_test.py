"""Documentation that cannot drift: the site builds with `mkdocs build
--strict`; every link and anchor resolves; README.md stays short and
reaches every page; the CLI reference matches what each verb accepts and
its --help; the job file reference matches the parser's field list
(`lockstep check --fields`); the plots are what scripts/make_plots.py draws
from the committed figures; and every shell or Python block in README.md
and docs/ either runs here, as written, or says `# not run: WHY` on its
first line.

Blocks run page by page in a scratch folder laid out as a checkout
(examples/, client/python, bazel-bin/client/lockstep), with the
coordinator's documented port 7070 replaced by a free one; a page whose
blocks start no coordinator of their own gets one with two workers at
$LOCKSTEP_COORDINATOR. Every process a page started is killed by its
process group at the end."""

import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = os.environ.get("DOCS_ROOT", os.getcwd())
BINARY = os.path.abspath(os.environ.get("LOCKSTEP_BINARY", "bazel-bin/client/lockstep"))
PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
DOCS = [os.path.join(ROOT, "README.md")] + PAGES
RUN_LANGS = {"sh", "bash", "shell", "console", "python", "py"}
NOT_RUN = re.compile(r"^#\s*not run:\s*\S")


def rel(path):
    return os.path.relpath(path, ROOT)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def blocks(path):
    """[(line, language, text)] of the fenced code blocks of a page."""
    out = []
    lang = None
    start = 0
    body = []
    for n, line in enumerate(read(path).split("\n"), 1):
        m = re.match(r"^```(\S*)\s*$", line)
        if m and lang is None:
            lang, start, body = m.group(1), n, []
        elif line.startswith("```") and lang is not None:
            out.append((start, lang, "\n".join(body)))
            lang = None
        elif lang is not None:
            body.append(line)
    assert lang is None, f"{rel(path)}: the block at line {start} never ends"
    return out


def without_code(text):
    return re.sub(r"```.*?```", "", text, flags=re.S)


# -- the site ---------------------------------------------------------------


def test_the_site_builds_strictly(tmp_path):
    # A copy (the runfiles are symlinks), built as the README says.
    for name in ("docs", "mkdocs.yml"):
        src = os.path.join(ROOT, name)
        if os.path.isdir(src):
            shutil.copytree(src, tmp_path / name, symlinks=False)
        else:
            shutil.copy(src, tmp_path / name)
    run = subprocess.run(
        ["/usr/bin/mkdocs", "build", "--strict", "--site-dir",
         str(tmp_path / "site")], cwd=tmp_path, capture_output=True,
        text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    for page in PAGES:
        name = os.path.basename(page)[:-3]
        built = tmp_path / "site" / ("index.html" if name == "index"
                                     else f"{name}/index.html")
        assert built.exists(), f"{rel(page)} was not built"
    # Every page is in the navigation.
    nav = read(os.path.join(ROOT, "mkdocs.yml"))
    for page in PAGES:
        assert os.path.basename(page) in nav, f"{rel(page)} is not in nav"


def slug(heading):
    """The anchor Python-Markdown's toc extension (mkdocs) gives a
    heading."""
    from markdown.extensions.toc import slugify
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return slugify(text.strip(), "-")


def anchors(path):
    return {slug(m.group(1)) for m in re.finditer(
        r"^#{1,6} (.+?)\s*$", without_code(read(path)), re.M)}


def test_every_link_and_anchor_resolves():
    problems = []
    for path in DOCS:
        text = without_code(read(path))
        text = re.sub(r"`[^`\n]*`", "", text)
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue  # an external address
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) \
                if file else path
            if not os.path.exists(dest):
                problems.append(f"{rel(path)}: {target}: no such file")
                continue
            if path != os.path.join(ROOT, "README.md") and \
                    not dest.startswith(os.path.join(ROOT, "docs")):
                problems.append(f"{rel(path)}: {target}: outside docs/ "
                                "(the site would not have it)")
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"{rel(path)}: {target}: no heading with "
                                f"that anchor in {rel(dest)}")
    assert not problems, "\n".join(problems)


def test_the_readme_is_short_and_reaches_every_page():
    readme = read(os.path.join(ROOT, "README.md"))
    lines = readme.count("\n")
    assert lines <= 250, f"README.md has {lines} lines (at most 250)"
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)\)", readme))
    missing = [os.path.basename(p) for p in PAGES
               if os.path.basename(p) not in linked]
    assert not missing, f"README.md does not link to: {missing}"


# -- the CLI reference -------------------------------------------------------


def lockstep(*args):
    return subprocess.run([BINARY, *args], capture_output=True, text=True,
                          timeout=30)


def verbs():
    out = lockstep("help").stdout
    return re.findall(r"^  (\w+)\b", out.split("commands:\n", 1)[1], re.M)


def accepted_flags(verb):
    """What the verb's parser takes: the list its unknown-flag error
    gives."""
    run = lockstep(verb, "--no-such-flag-for-the-docs-test")
    m = re.search(r"unknown flag --no-such-flag-for-the-docs-test \(this "
                  r"command takes (.*)\)", run.stderr)
    assert m, f"lockstep {verb}: no flag list in {run.stderr!r}"
    if m.group(1) == "no flags":
        return set()
    return {f[2:] for f in m.group(1).split(", ")}


def flags_in(text):
    return set(re.findall(r"(?<![\w-])--([a-z][a-z0-9-]*)", text))


def help_flags_of(verb):
    """The flags `lockstep VERB --help` offers: those of its usage lines
    and those that begin a line (a flag named mid-sentence, as "the
    coordinator's --hang-timeout" or "the --config=cuda build", is
    another command's)."""
    out = set()
    for line in lockstep(verb, "--help").stdout.split("\n"):
        if line.startswith("usage:") or re.match(r"^\s+lockstep ", line):
            out |= flags_in(line)
        m = re.match(r"^\s*--([a-z][a-z0-9-]*)", line)
        if m:
            out.add(m.group(1))
    return out - {"help"}


def reference_sections():
    """{verb: the flags in the first column of its section's tables}."""
    text = read(os.path.join(ROOT, "docs", "cli.md"))
    sections = {}
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        head, _, body = part.partition("\n")
        m = re.match(r"lockstep (\w+)$", head.strip())
        if not m:
            continue
        firsts = []
        for line in body.split("\n"):
            if line.startswith("|") and not re.match(r"^\|\s*-", line):
                cells = re.split(r"(?<!\\)\|", line)
                if len(cells) > 2 and cells[1].strip() != "flag":
                    firsts.append(cells[1])
        sections[m.group(1)] = flags_in(" ".join(firsts))
    return sections


def test_the_cli_reference_matches_every_verb_and_flag():
    documented = reference_sections()
    listed = verbs()
    assert sorted(documented) == sorted(listed), (
        "docs/cli.md sections vs `lockstep help`: documented "
        f"{sorted(documented)}, the binary has {sorted(listed)}")
    problems = []
    for verb in listed:
        if verb in ("help", "version"):
            accepted = set()
            help_flags = set()
        else:
            # Flags only tests use are named *-for-testing and left out.
            accepted = {f for f in accepted_flags(verb)
                        if f != "help" and not f.endswith("-for-testing")}
            help_flags = help_flags_of(verb)
        if help_flags != accepted:
            problems.append(
                f"lockstep {verb} --help: lists {sorted(help_flags)}, the "
                f"verb takes {sorted(accepted)}")
        if documented[verb] != accepted:
            problems.append(
                f"docs/cli.md, lockstep {verb}: documents "
                f"{sorted(documented[verb])}, the verb takes "
                f"{sorted(accepted)}")
    assert not problems, "\n".join(problems)


# -- the job file reference --------------------------------------------------


def documented_fields():
    """The fields docs/job-file.md's tables name: a first cell of
    backquoted dotted paths, or `TYPE[, TYPE]: `field`, ...` for a layer
    type's or a data format's fields."""
    out = set()
    for line in read(os.path.join(ROOT, "docs", "job-file.md")).split("\n"):
        if not line.startswith("|") or re.match(r"^\|\s*-", line):
            continue
        cell = re.split(r"(?<!\\)\|", line)[1].strip()
        if cell == "field":
            continue
        m = re.match(r"^([a-z0-9_]+(?:,\s*[a-z0-9_]+)*):\s*(.*)$", cell)
        if m:
            for kind in re.split(r",\s*", m.group(1)):
                for key in re.findall(r"`([^`]+)`", m.group(2)):
                    out.add((kind, key))
        else:
            for path in re.findall(r"`([^`]+)`", cell):
                out.add(path)
    return out


def test_the_job_file_reference_matches_the_parser():
    fields = lockstep("check", "--fields").stdout.split("\n")
    fields = [f for f in fields if f]
    assert len(fields) > 100
    kinds = {}
    parser = set()
    for f in fields:
        m = re.match(r"^(layer|data) (\w+): (\w+)$", f)
        if m:
            kinds[m.group(2)] = m.group(1)
            parser.add(f)
        else:
            parser.add(f)
    documented = set()
    unknown = []
    for item in documented_fields():
        if isinstance(item, tuple):
            kind, key = item
            if kind not in kinds:
                unknown.append(f"{kind}: {key} (no layer type or data format "
                               f"named {kind} has fields)")
                continue
            documented.add(f"{kinds[kind]} {kind}: {key}")
        else:
            documented.add(item)
    missing = sorted(parser - documented)
    extra = sorted(documented - parser)
    assert not unknown and not missing and not extra, (
        f"accepted by the parser but not in docs/job-file.md: {missing}\n"
        f"in docs/job-file.md but not accepted: {extra}\n{unknown}")


# -- the plots ---------------------------------------------------------------


def test_the_plots_are_drawn_from_the_committed_figures(tmp_path):
    run = subprocess.run(
        ["/usr/bin/python3", os.path.join(ROOT, "scripts", "make_plots.py"),
         str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    drawn = sorted(os.listdir(tmp_path))
    committed = sorted(os.path.basename(p) for p in glob.glob(
        os.path.join(ROOT, "docs", "img", "*.svg")))
    assert drawn == committed and drawn
    performance = read(os.path.join(ROOT, "docs", "performance.md"))
    for name in drawn:
        with open(tmp_path / name, "rb") as a, \
                open(os.path.join(ROOT, "docs", "img", name), "rb") as b:
            assert a.read() == b.read(), (
                f"docs/img/{name} is not what scripts/make_plots.py draws "
                "from benchmarks/results/: run it and commit the image")
        assert f"(img/{name})" in performance, f"{name} is not shown"


# -- the code blocks ---------------------------------------------------------


def runnable(path):
    return [(line, lang, text) for line, lang, text in blocks(path)
            if lang in RUN_LANGS and not NOT_RUN.match(text.lstrip())]


def test_every_block_runs_or_says_why_not():
    problems = []
    for path in DOCS:
        for line, lang, text in blocks(path):
            first = text.lstrip().split("\n", 1)[0]
            if lang == "":
                problems.append(f"{rel(path)}:{line}: a block without a "
                                "language (text, json, sh, python, ...)")
            if "not run" in first and not NOT_RUN.match(first):
                problems.append(f"{rel(path)}:{line}: write `# not run: WHY`")
            if lang not in RUN_LANGS and NOT_RUN.match(first):
                problems.append(f"{rel(path)}:{line}: a {lang} block is "
                                "never run; drop the mark")
    assert not problems, "\n".join(problems)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def workspace(folder):
    """A scratch folder laid out as a checkout after scripts/run_local.sh."""
    shutil.copytree(os.path.join(ROOT, "examples"),
                    os.path.join(folder, "examples"), symlinks=False)
    os.makedirs(os.path.join(folder, "bazel-bin", "client"))
    os.symlink(BINARY, os.path.join(folder, "bazel-bin", "client", "lockstep"))
    os.makedirs(os.path.join(folder, "client"))
    os.symlink(os.path.join(ROOT, "client", "python"),
               os.path.join(folder, "client", "python"))


class Page:
    """Runs one page's blocks; kills everything they started."""

    def __init__(self, folder, port):
        self.folder = folder
        self.port = port
        self.groups = []
        self.env = dict(os.environ)
        self.env["PATH"] = os.path.join(folder, "bazel-bin", "client") + \
            os.pathsep + self.env.get("PATH", "")
        self.env["PYTHONPATH"] = os.path.join(folder, "client", "python")
        self.env["LOCKSTEP_COORDINATOR"] = f"127.0.0.1:{port}"
        self.env.pop("LOCKSTEP_BINARY", None)
        self.env["MPLBACKEND"] = "Agg"

    def spawn(self, args, log):
        out = open(os.path.join(self.folder, log), "ab")
        p = subprocess.Popen(args, cwd=self.folder, env=self.env, stdout=out,
                             stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        self.groups.append(p.pid)
        return p

    def cluster(self):
        self.spawn([BINARY, "coordinator", "--listen",
                    f"127.0.0.1:{self.port}", "--storage", "harness_storage"],
                   "harness-coordinator.log")
        assert lockstep("health", f"127.0.0.1:{self.port}", "--wait",
                        "--timeout", "30").returncode == 0
        for i in (1, 2):
            self.spawn([BINARY, "worker", "--coordinator",
                        f"127.0.0.1:{self.port}", "--threads", "1"],
                       f"harness-worker{i}.log")

    def run(self, lang, text, where):
        text = text.replace(":7070", f":{self.port}")
        log = os.path.join(self.folder, "block.log")
        if lang.startswith("py"):
            args = ["/usr/bin/python3", "-c", text]
        else:
            args = ["bash", "-e", "-o", "pipefail", "-c", text]
        with open(log, "wb") as out:
            p = subprocess.Popen(args, cwd=self.folder, env=self.env,
                                 stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL,
                                 start_new_session=True)
            self.groups.append(p.pid)
            try:
                rc = p.wait(timeout=300)
            except subprocess.TimeoutExpired:
                rc = "timed out after 300 s"
        with open(log, errors="replace") as f:
            output = f.read()
        assert rc == 0, f"{where} failed ({rc}):\n{text}\n--- output:\n" \
            f"{output[-6000:]}"
        return output

    def close(self):
        for pgid in self.groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass


PAGES_WITH_BLOCKS = [p for p in DOCS if runnable(p)]


@pytest.mark.parametrize("path", PAGES_WITH_BLOCKS, ids=rel)
def test_the_pages_blocks_run_as_written(path, tmp_path):
    folder = str(tmp_path)
    workspace(folder)
    page = Page(folder, free_port())
    try:
        todo = runnable(path)
        if not any("lockstep coordinator" in text for _, _, text in todo):
            page.cluster()
        for line, lang, text in todo:
            page.run(lang, text, f"{rel(path)}:{line} ({lang})")
    finally:
        page.close()
