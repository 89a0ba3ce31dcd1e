"""kernels.fingerprint: what changes a kernel's code fingerprint and what does not (CPU)."""

import ast
import shutil
import subprocess

import pytest

from kernels import fingerprint, registry
from kernels.fingerprint import GitTree, Tree, WorkTree, normalized_cuda
from kernels.grouped.grouped import KERNELS

RUNNER = "kernels.fam.run:make_runner"
FILES = {
    "kernels/toolchain/build.py": 'NVRTC_OPTIONS = ("--std=c++17",)\n',
    "kernels/registry.py": "def check_batch(M):\n    return M\n",
    "kernels/fam/common.py": (
        "STEP = 2\n"
        "def helper(x):\n"
        "    return x * STEP\n"
        "def unused():\n"
        "    return 1\n"
    ),
    "kernels/fam/run.py": (
        '"""The module docstring."""\n'
        "from kernels.fam import common\n"
        "from kernels.fam.common import helper\n"
        "from kernels.registry import check_batch\n"
        "TABLE = {1: 64, 16: 128}\n"
        "SPECS = ('notes of the spec',)\n"
        "class Runner:\n"
        '    """A runner."""\n'
        "    def grid(self, M: int) -> int:\n"
        "        check_batch(M)\n"
        "        return helper(TABLE[M]) + common.STEP  # a comment\n"
        "def make_runner(spec):\n"
        "    return Runner()\n"
        "def other_runner(spec):\n"
        "    return 2\n"
    ),
    "kernels/fam/k.cu": '// kernel\n#include "h.cuh"\n__global__ void k(float* y) {  /* body */\n  y[0] = ONE;\n}\n',
    "kernels/fam/h.cuh": "#define ONE 1.0f\n",
}


class DictTree(Tree):
    def __init__(self, files):
        super().__init__()
        self.files = dict(files)

    def _load(self, path):
        text = self.files.get(path)
        return None if text is None else text.encode()

    def _cuda_paths(self):
        return [p for p in self.files if p.endswith((".cu", ".cuh"))]


def fp(**edits):
    """The fingerprint of the toy kernel with files replaced (None: removed), or a (old, new) text substitution."""
    files = dict(FILES)
    for key, edit in edits.items():
        path = key.replace("__", "/").replace("_DOT_", ".")
        if edit is None:
            files.pop(path)
        elif isinstance(edit, tuple):
            assert edit[0] in files[path], edit
            files[path] = files[path].replace(*edit)
        else:
            files[path] = edit
    return fingerprint.fingerprint("k.cu", RUNNER, DictTree(files))


BASE = fp()
RUN = "kernels__fam__run_DOT_py"
COMMON = "kernels__fam__common_DOT_py"


def test_the_toy_kernel_has_a_fingerprint_that_stays_put():
    # Pinned: the same on every Python the workbench runs on (3.11-3.13; `ast.dump` differs between them) and across
    # releases. A change of this value marks every row any GPU recorded as measuring changed code: make it on purpose.
    assert BASE == "b95b2622d2778268" and fp() == BASE


def test_the_canonical_tree_leaves_out_empty_fields():
    text = fingerprint._canonical(ast.parse("def f(x, *a):\n    return g(x)[0]"))
    assert text == ("Module(body=[FunctionDef(name='f', args=arguments(args=[arg(arg='x')], vararg=arg(arg='a')), "
                    "body=[Return(value=Subscript(value=Call(func=Name(id='g', ctx=Load()), args=[Name(id='x', "
                    "ctx=Load())]), slice=Constant(value=0), ctx=Load()))])])")


@pytest.mark.parametrize("path, edit", [
    (RUN, ("# a comment", "# another comment")),
    (RUN, ('"""A runner."""', '"""Another docstring."""')),
    (RUN, ('"""The module docstring."""', "")),
    (RUN, ("M: int) -> int", "M: float) -> str")),  # annotations
    (RUN, ("return 2", "return 3")),  # a runner of another kernel
    (RUN, ("'notes of the spec'", "'other notes'")),  # the declarations (SPECS)
    (COMMON, ("return 1", "return 5")),  # a helper the runner never reaches
    ("kernels__fam__k_DOT_cu", ("/* body */", "/* the body, explained */")),
    ("kernels__fam__k_DOT_cu", ("  y[0] = ONE;", "      y[0]   =   ONE;\n\n")),
    ("kernels__registry_DOT_py", ("return M", "return M + 1")),  # the harness is left out
])
def test_edits_that_change_no_code_keep_the_fingerprint(path, edit):
    assert fp(**{path: edit}) == BASE


@pytest.mark.parametrize("path, edit", [
    (RUN, ("16: 128", "16: 256")),  # the runner's table
    (RUN, ("+ common.STEP", "- common.STEP")),
    (COMMON, ("STEP = 2", "STEP = 3")),  # reached through helper() and through common.STEP
    (COMMON, ("x * STEP", "x + STEP")),
    ("kernels__fam__k_DOT_cu", ("y[0] = ONE", "y[1] = ONE")),
    ("kernels__fam__h_DOT_cuh", ("1.0f", "2.0f")),  # an included header
    ("kernels__toolchain__build_DOT_py", ('"--std=c++17"', '"--std=c++20"')),  # the NVRTC options
])
def test_edits_to_the_measured_code_change_the_fingerprint(path, edit):
    assert fp(**{path: edit}) != BASE


@pytest.mark.parametrize("path", ["kernels__fam__h_DOT_cuh", "kernels__fam__k_DOT_cu", COMMON, RUN])
def test_a_tree_without_the_kernels_code_has_no_fingerprint(path):
    assert fp(**{path: None}) is None


def test_a_library_kernel_hashes_its_runner_alone():
    tree = DictTree(FILES)
    assert fingerprint.fingerprint(None, RUNNER, tree) not in (None, BASE)


def test_comments_and_blank_space_leave_cuda_text():
    assert normalized_cuda(b"a  = 1; // one\n\n/* two\nlines */ b\t=\t2;\n") == b"a = 1;\nb = 2;"


def test_every_declared_kernel_has_a_fingerprint_here():
    names = [s.name for s in registry.specs()] + list(KERNELS)
    prints = {n: fingerprint.of_kernel(n) for n in names}
    assert all(isinstance(p, str) and len(p) == 16 for p in prints.values()), prints
    assert prints["w4a16_gemv"] != prints["w8a16_gemv"]  # one runner class, different CUDA files
    assert prints["fp16_tc_gemv"] == prints["bf16_tc_gemv"]  # one file and one runner: one fingerprint
    assert fingerprint.of_kernel("no_such_kernel") is None and fingerprint.current("no_such_kernel") == ""


def _git_clean(root) -> bool:
    if shutil.which("git") is None or not (root / ".git").exists():
        return False
    done = subprocess.run(["git", "status", "--porcelain", "--", "kernels", "models"], cwd=root,
                          capture_output=True, text=True)
    return done.returncode == 0 and not done.stdout.strip()


def test_head_of_a_clean_checkout_reads_as_the_work_tree():
    root = fingerprint.ROOT
    if not _git_clean(root):
        pytest.skip("needs a git checkout whose kernels/ and models/ have no local changes")
    head, work = GitTree("HEAD", root), WorkTree(root)
    assert head.exists()
    for name in ["w4a16_tc_gemv", "wg_w8a16", "cublas_bf16", "grouped_w4a16_tc"]:
        assert fingerprint.of_kernel(name, head) == fingerprint.of_kernel(name, work)
    head.close()


def test_git_tree_reads_each_commit(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for path, text in FILES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=tmp_path, check=True)
    first = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    (tmp_path / "kernels/fam/h.cuh").write_text("#define ONE 2.0f\n")
    subprocess.run([*git, "commit", "-qam", "two"], cwd=tmp_path, check=True)
    old, now = GitTree(first, tmp_path), WorkTree(tmp_path)
    assert old.exists() and not GitTree("0" * 40, tmp_path).exists()
    assert fingerprint.fingerprint("k.cu", RUNNER, old) == BASE
    assert fingerprint.fingerprint("k.cu", RUNNER, now) == fp(kernels__fam__h_DOT_cuh=("1.0f", "2.0f"))
    assert old.read("kernels/no_such_file.py") is None and old.read("kernels/fam") is None
    old.close()
