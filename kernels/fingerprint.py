"""A kernel's code fingerprint: which version of the code decides what the kernel measures.

The profiler writes it into every row (`kernel_fingerprint`); `workbench stale` compares a row's with the one the
installed code has, so rows that measure code changed since are found by a check, not by reading the history.

A fingerprint hashes
- the kernel's CUDA source (`KernelSpec.source`) and every file it `#include "..."`s, comments and blank space left
  out, with the NVRTC options every compile gets (`kernels.toolchain.build.NVRTC_OPTIONS`);
- the Python its runner reaches: from `KernelSpec.runner` ("module:function"), every top-level definition named on
  the way, followed into the modules of `kernels/` and `models/` (and the runner's own module). Docstrings, comments
  and annotations are left out, so an edit to a comment, to another runner of the same module or to a spec's notes
  and model facts changes nothing; a runner class shared by several kernels (with its tables) counts for each.
Left out on purpose: the measurement harness (kernels.registry, kernels.toolchain, the inputs of kernels.problems and
kernels.input_cache, the float64 references, workbench/measure). A change there that alters what would be measured
calls for re-recording the dataset as a whole (DESIGN.md), not for a per-kernel flag.

The same function reads any tree: the files on disk (`WorkTree`) or a git commit (`GitTree`), so rows recorded
before the column existed are checked against the commit they name.
"""

from __future__ import annotations

import ast
import hashlib
import re
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kernels.toolchain.build import CUDA_SUFFIXES

ROOT = Path(__file__).resolve().parents[1]  # the folder holding kernels/, models/ and workbench/
FOLLOW = ("kernels.", "models.")
HARNESS = ("kernels.registry", "kernels.toolchain", "kernels.problems", "kernels.input_cache", "kernels.reference",
           "models.errors")
NEVER = frozenset({"SPECS"})  # the declarations (notes, model facts) are not measured code
OPTIONS = ("kernels.toolchain.build", "NVRTC_OPTIONS")
GROUPED_RUNNER = "kernels.grouped.grouped:GroupedRunner"  # what runs the grouped MoE kernels (workbench profile --moe)
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
_COMMENT = re.compile(rb"//[^\n]*|/\*.*?\*/", re.S)


class Tree:
    """Files read by path relative to the tree's root ("/"-separated), each read once, and the Python modules among
    them parsed once."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes | None] = {}
        self._modules: dict[str, _Module | None] = {}
        self._cuda: dict[str, str] | None = None

    def _load(self, path: str) -> bytes | None:
        raise NotImplementedError

    def _cuda_paths(self) -> list[str]:
        raise NotImplementedError

    def read(self, path: str) -> bytes | None:
        """The bytes of a file; None when the tree has none."""
        if path not in self._blobs:
            self._blobs[path] = self._load(path)
        return self._blobs[path]

    def cuda_files(self) -> dict[str, str]:
        """Every .cu/.cuh file under kernels/ by file name (the names the launchers and #include use)."""
        if self._cuda is None:
            self._cuda = {p.rsplit("/", 1)[-1]: p for p in sorted(self._cuda_paths())}
        return self._cuda

    def module_path(self, module: str) -> str | None:
        base = module.replace(".", "/")
        return next((p for p in (base + ".py", base + "/__init__.py") if self.read(p) is not None), None)

    def module(self, name: str) -> _Module | None:
        """The parsed module `name` ("kernels.tcgemv.tc_gemv"); None when the tree does not hold it."""
        if name not in self._modules:
            path = self.module_path(name)
            text = self.read(path) if path else None
            self._modules[name] = _parse(text) if text is not None else None
        return self._modules[name]


class WorkTree(Tree):
    """The files on disk (the installed or checked-out code)."""

    def __init__(self, root: Path = ROOT) -> None:
        super().__init__()
        self.root = root

    def _load(self, path: str) -> bytes | None:
        p = self.root / path
        return p.read_bytes() if p.is_file() else None

    def _cuda_paths(self) -> list[str]:
        return [p.relative_to(self.root).as_posix() for p in (self.root / "kernels").rglob("*")
                if p.suffix in CUDA_SUFFIXES]


class GitTree(Tree):
    """The files of one commit of the git repository at `root`, read through one `git cat-file --batch` (nothing is
    checked out)."""

    def __init__(self, commit: str, root: Path = ROOT) -> None:
        super().__init__()
        self.commit, self.root = commit, root
        self._batch: subprocess.Popen | None = None

    def _git(self, *args: str) -> bytes | None:
        try:
            done = subprocess.run(["git", *args], cwd=self.root, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    def exists(self) -> bool:
        """Whether the repository has this commit (a shallow clone or another repository may not)."""
        return self._git("cat-file", "-e", f"{self.commit}^{{commit}}") is not None

    def _load(self, path: str) -> bytes | None:
        if self._batch is None:
            self._batch = subprocess.Popen(["git", "cat-file", "--batch"], cwd=self.root, stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        pipe_in, pipe_out = self._batch.stdin, self._batch.stdout
        assert pipe_in is not None and pipe_out is not None
        pipe_in.write(f"{self.commit}:{path}\n".encode())
        pipe_in.flush()
        header = pipe_out.readline().split()  # "<sha> blob <size>", or "<name> missing"
        if len(header) != 3:
            return None
        data = pipe_out.read(int(header[2]) + 1)[:-1]
        return data if header[1] == b"blob" else None

    def close(self) -> None:
        if self._batch is not None:
            self._batch.communicate()
            self._batch = None

    def __del__(self) -> None:
        if getattr(self, "_batch", None) is not None:
            self._batch.kill()
            self._batch.wait()

    def _cuda_paths(self) -> list[str]:
        listing = self._git("ls-tree", "-r", "--name-only", self.commit, "--", "kernels") or b""
        return [p for p in listing.decode().splitlines() if p.endswith(CUDA_SUFFIXES)]


# ---------------------------------------------------------------------------------------------------- CUDA
def normalized_cuda(text: bytes) -> bytes:
    """`text` without comments, each line's blank space collapsed, blank lines dropped."""
    lines = (b" ".join(line.split()) for line in _COMMENT.sub(b" ", text).splitlines())
    return b"\n".join(line for line in lines if line)


def cuda_closure(tree: Tree, name: str) -> dict[str, bytes] | None:
    """The normalized text of CUDA file `name` and of everything it includes (by file name); None when `name` or an
    included file is not in the tree."""
    files, out, todo = tree.cuda_files(), {}, [name]
    while todo:
        n = todo.pop()
        if n in out:
            continue
        text = tree.read(files[n]) if n in files else None
        if text is None:
            return None
        out[n] = normalized_cuda(text)
        todo.extend(m.decode() for m in _INCLUDE.findall(out[n]))  # a commented-out include does not count
    return out


# ---------------------------------------------------------------------------------------------------- Python
class _Strip(ast.NodeTransformer):
    """Drops docstrings and annotations (an annotated field keeps its name and value)."""

    def _body(self, node: ast.AST) -> ast.AST:
        self.generic_visit(node)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    visit_Module = visit_ClassDef = _body

    def visit_FunctionDef(self, node: ast.AST) -> ast.AST:
        node.returns = None
        return self._body(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        self.generic_visit(node)
        node.annotation = ast.Constant(None)
        return node


@dataclass(frozen=True)
class _Module:
    defs: dict[str, tuple[str, tuple[tuple[str, ...], ...]]]  # top-level name -> (its statements' dump, references)
    imports: dict[str, tuple[str, str | None]]  # local name -> (module, attribute), None: the module itself


def _parse(text: bytes) -> _Module:
    tree = _Strip().visit(ast.parse(text))
    nodes: dict[str, list[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            nodes.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        nodes.setdefault(n.id, []).append(node)
    defs = {name: ("\n".join(_canonical(n) for n in bound),
                   tuple(dict.fromkeys(tuple(c) for n in bound for c in _references(n))))
            for name, bound in nodes.items()}
    imports: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):  # imports inside functions too (the lazy ones)
        if isinstance(node, ast.Import):
            for a in node.names:
                imports[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                imports[a.asname or a.name] = (node.module, a.name)
    return _Module(defs, imports)


def _canonical(node: object) -> str:
    """A syntax tree as text that is the same on every Python version the workbench runs on: `ast.dump` is not (3.12
    adds `type_params=[]`, 3.13 leaves out empty fields), so fields that are None or empty are left out here."""
    if isinstance(node, ast.AST):
        fields = ((name, getattr(node, name, None)) for name in node._fields)
        shown = ", ".join(f"{name}={_canonical(value)}" for name, value in fields if value is not None and value != [])
        return f"{type(node).__name__}({shown})"
    if isinstance(node, list):
        return "[" + ", ".join(_canonical(item) for item in node) + "]"
    return repr(node)


def _followed(module: str, root_module: str) -> bool:
    if module == root_module:
        return True
    return module.startswith(FOLLOW) and not any(module == h or module.startswith(h + ".") for h in HARNESS)


def _references(node: ast.AST) -> list[list[str]]:
    """Every name `node` loads, with the attribute chain read off it: `build.function` -> ["build", "function"]."""
    chains = []
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            chain, base = [n.attr], n.value
            while isinstance(base, ast.Attribute):
                chain.insert(0, base.attr)
                base = base.value
            if isinstance(base, ast.Name):
                chains.append([base.id, *chain])
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            chains.append([n.id])
    return chains


class _Walk:
    """The top-level definitions reachable from one root, each as (module, name, its stripped source dump)."""

    def __init__(self, tree: Tree, root_module: str) -> None:
        self.tree, self.root_module = tree, root_module
        self.seen: dict[tuple[str, str], str] = {}

    def is_module(self, name: str) -> bool:
        return self.tree.module_path(name) is not None

    def symbol(self, module: str, name: str, force: bool = False) -> bool:
        """Follow `module.name`; False when the module to follow is not in the tree."""
        if name in NEVER or (module, name) in self.seen or not (force or _followed(module, self.root_module)):
            return True
        info = self.tree.module(module)
        if info is None:
            return False
        if name in info.defs:
            self.seen[(module, name)], references = info.defs[name]
            return all(self.chain(module, list(c)) for c in references)
        if name in info.imports:  # a re-export: follow it where it was defined
            src, attr = info.imports[name]
            return self.target(src, attr, [])
        self.seen[(module, name)] = ""  # a name the module does not bind (a builtin): nothing to hash
        return True

    def chain(self, module: str, chain: list[str]) -> bool:
        info = self.tree.module(module)
        head = chain[0]
        if info is None or head in NEVER:
            return info is not None
        if head in info.defs:
            return self.symbol(module, head)
        if head in info.imports:
            src, attr = info.imports[head]
            return self.target(src, attr, chain[1:])
        return True  # a builtin or a local name

    def target(self, module: str, attr: str | None, rest: list[str]) -> bool:
        """An imported name: the module `module` itself (attr None) or its attribute, then the chain `rest`."""
        if attr is not None:
            if self.is_module(f"{module}.{attr}"):
                module, attr = f"{module}.{attr}", None
            else:
                return self.symbol(module, attr)
        while rest and self.is_module(f"{module}.{rest[0]}"):
            module, rest = f"{module}.{rest[0]}", rest[1:]
        return self.symbol(module, rest[0]) if rest else True


# ---------------------------------------------------------------------------------------------------- fingerprint
def fingerprint(source: str | None, runner: str, tree: Tree | None = None) -> str | None:
    """The code fingerprint (16 hex digits) of a kernel built from CUDA file `source` (None: a library kernel) and
    run by `runner` ("module:function"), read from `tree` (default: the files on disk); None when the tree lacks
    the source, an included file or a module on the runner's path."""
    tree = tree or work_tree()
    module, _, function = runner.partition(":")
    walk = _Walk(tree, module)
    if not walk.symbol(module, function, force=True):
        return None
    digest = hashlib.sha256()
    for (mod, name), dump in sorted(walk.seen.items()):
        digest.update(f"{mod}:{name}\n{dump}\n".encode())
    if source is not None:
        files = cuda_closure(tree, source)
        if files is None or not walk.symbol(*OPTIONS, force=True):
            return None
        digest.update(walk.seen[OPTIONS].encode())
        for name, text in sorted(files.items()):
            digest.update(name.encode() + b"\n" + text + b"\n")
    return digest.hexdigest()[:16]


def kernel_code(name: str) -> tuple[str | None, str] | None:
    """(CUDA source, runner) of a kernel this workbench measures, from its declaration (the registry's KernelSpec; a
    grouped MoE kernel: kernels.grouped.grouped.KERNELS and its runner class); None for any other name."""
    from kernels import registry
    from kernels.grouped.grouped import KERNELS

    specs = {s.name: s for s in registry.specs()}
    if name in specs:
        return specs[name].source, specs[name].runner
    if name in KERNELS:
        return KERNELS[name][1], GROUPED_RUNNER
    return None


def of_kernel(name: str, tree: Tree | None = None) -> str | None:
    """The fingerprint of kernel `name` read from `tree` (default: the files on disk), its code found where this
    workbench declares it; None for a name it does not know or code the tree does not hold there."""
    code = kernel_code(name)
    return None if code is None else fingerprint(*code, tree=tree)


@cache
def work_tree() -> WorkTree:
    """The files on disk, read once per process."""
    return WorkTree()


@cache
def current(name: str) -> str:
    """`of_kernel` of the files on disk, computed once per process ("" for a kernel it does not know: a test's)."""
    return of_kernel(name) or ""


def catalogue() -> dict:
    """What `workbench kernel-facts` publishes (data/model/kernel-facts.json): the registry's entries, each with the
    fingerprint of its code on disk (models.kernel_catalogue.KernelEntry by name)."""
    from dataclasses import replace

    from kernels import registry

    return {name: replace(entry, fingerprint=current(name)) for name, entry in registry.catalogue().items()}
