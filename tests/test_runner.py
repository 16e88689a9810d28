"""The reader's runner: parameters injected, results written, failures and bad names reported."""

import json
import re
import subprocess
import sys
import textwrap

import pytest
from myst_header import MYST_HEADER

from itemsampling.run import run_notebook

HEADER = MYST_HEADER + "\n# Test\n"


def _nb(tmp_path, body, name="nb.md"):
    p = tmp_path / name
    p.write_text(HEADER + textwrap.dedent(body))
    return p


GOOD = """
```{code-cell} ipython3
:tags: [parameters]

x = 2
ys = [1, 2]
```

```{code-cell} ipython3
from itemsampling.book import record
record("square", x * x)
record("total", sum(ys))
```
"""


def test_cli_writes_results(tmp_path):
    nb = _nb(tmp_path, GOOD)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "itemsampling.run", str(nb), "-p", "x", "7", "-p", "ys", "[3, 4, 5]",
                           "--out", str(out), "--no-progress", "--no-html"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads((out / "results.json").read_text())
    assert payload["results"] == {"square": 49, "total": 12}
    assert payload["parameters"] == {"x": 7, "ys": [3, 4, 5]}
    assert (out / "nb.ipynb").exists()


def test_defaults_used_without_parameters(tmp_path):
    payload = run_notebook(_nb(tmp_path, GOOD), out=tmp_path / "o", progress=False)
    assert payload["results"] == {"square": 4, "total": 3}


def test_unknown_parameter_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown parameter"):
        run_notebook(_nb(tmp_path, GOOD), {"z": 1}, tmp_path / "o", progress=False)


def test_failing_notebook_raises_and_cli_exits_nonzero(tmp_path):
    nb = _nb(tmp_path, GOOD + "\n```{code-cell} ipython3\nraise ZeroDivisionError('boom')\n```\n")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        run_notebook(nb, out=tmp_path / "o", progress=False)
    proc = subprocess.run([sys.executable, "-m", "itemsampling.run", str(nb), "--out", str(tmp_path / "o2"),
                           "--no-progress", "--no-html"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "boom" in proc.stderr


# ---------------------------------------------------------------------------------------------
# parameters: declared defaults, comments and types
# ---------------------------------------------------------------------------------------------
TYPED = """
```{code-cell} ipython3
:tags: [parameters]

# Everything a reader may change.
n_repeats = 100             # repetitions
rate = 0.5                  # a float
replacement = True          # decoys with replacement
sizes = [10, 100]           # sample sizes
shapes = [0.25, 0.5]
# the data set
dataset = "sim-ml100k"
names = ["a", "b"]
table = {"A": [1, 2]}
anything = None
derived = n_repeats // 2
pair_a, pair_b = "ndcg", 10  # a pair
```

```{code-cell} ipython3
from itemsampling.book import record
record("echo", {"n_repeats": n_repeats, "rate": rate, "replacement": replacement, "sizes": sizes,
                "shapes": shapes, "dataset": dataset, "names": names, "derived": derived})
```
"""


def test_notebook_parameters_reads_defaults_and_comments(tmp_path):
    from itemsampling.run import notebook_parameters

    params = notebook_parameters(_nb(tmp_path, TYPED))
    assert list(params) == ["n_repeats", "rate", "replacement", "sizes", "shapes", "dataset", "names", "table",
                            "anything", "derived", "pair_a", "pair_b"]
    assert params["n_repeats"].default == 100 and params["n_repeats"].comment == "repetitions"
    assert params["replacement"].default is True and params["sizes"].default == [10, 100]
    assert params["dataset"].comment == "the data set"      # the comment line above
    assert params["rate"].comment == "a float" and params["shapes"].comment == ""
    assert not params["derived"].literal and params["derived"].source == "n_repeats // 2"
    assert (params["pair_a"].default, params["pair_b"].default) == ("ndcg", 10)


@pytest.mark.parametrize("name, value, words", [
    ("n_repeats", "abc", "n_repeats must be an integer"),
    ("n_repeats", 2.5, "n_repeats must be an integer"),
    ("n_repeats", True, "n_repeats must be an integer"),
    ("replacement", "maybe", "replacement must be true or false"),
    ("replacement", 1, "replacement must be true or false"),
    ("rate", "fast", "rate must be a number"),
    ("sizes", 100, "sizes must be a list"),
    ("sizes", [10, 2.5], "sizes must be a list of integers"),
    ("shapes", [0.5, "x"], "shapes must be a list of numbers"),
    ("dataset", 3, "dataset must be a string"),
    ("names", ["a", 1], "names must be a list of strings"),
    ("table", [1], "table must be a mapping"),
])
def test_wrong_type_is_refused_before_the_kernel_starts(tmp_path, name, value, words):
    out = tmp_path / "o"
    with pytest.raises(ValueError, match=words):
        run_notebook(_nb(tmp_path, TYPED), {name: value}, out, progress=False)
    assert not (out / "results.json").exists() and not (out / "results.failed.json").exists()


def test_right_types_are_accepted_and_all_parameters_recorded(tmp_path):
    out = tmp_path / "o"
    payload = run_notebook(_nb(tmp_path, TYPED), {"rate": 2, "shapes": [1, 0.5], "anything": [1, "x"],
                                                   "derived": 7, "replacement": False}, out, progress=False)
    echo = payload["results"]["echo"]
    assert echo["rate"] == 2.0 and isinstance(echo["rate"], float) and echo["shapes"] == [1.0, 0.5]
    assert echo["derived"] == 7 and echo["replacement"] is False
    saved = json.loads((out / "results.json").read_text())
    assert saved == payload
    # the full parameter set: defaults included, overrides applied, expressions as their source
    assert saved["parameters"] == {"n_repeats": 100, "rate": 2.0, "replacement": False, "sizes": [10, 100],
                                   "shapes": [1.0, 0.5], "dataset": "sim-ml100k", "names": ["a", "b"],
                                   "table": {"A": [1, 2]}, "anything": [1, "x"], "derived": 7,
                                   "pair_a": "ndcg", "pair_b": 10}
    assert saved["overrides"] == {"rate": 2.0, "shapes": [1.0, 0.5], "anything": [1, "x"], "derived": 7,
                                  "replacement": False}
    from itemsampling import __version__

    assert saved["package_version"] == __version__
    assert saved["datasets"]["dataset"]["kind"] == "simulated"
    assert saved["seconds"] > 0 and saved["started"].endswith("+00:00")
    assert saved["html"] is None


def test_git_commit_is_recorded_inside_a_repository(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    nb = _nb(repo, GOOD)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "PATH": "/usr/bin:/bin"}
    for cmd in (["git", "init", "-q"], ["git", "add", "nb.md"], ["git", "commit", "-qm", "nb"]):
        subprocess.run(cmd, cwd=repo, check=True, env=env)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    payload = run_notebook(nb, out=tmp_path / "o", progress=False)
    assert payload["git"] == {"commit": head, "dirty": False}
    nb.write_text(nb.read_text() + "\n")
    assert run_notebook(nb, out=tmp_path / "o", progress=False)["git"] == {"commit": head, "dirty": True}
    # outside a repository there is no commit
    from itemsampling.run import _git

    (tmp_path / "free").mkdir()
    assert _git(tmp_path / "free") is None


def test_folder_dataset_given_relative_to_the_current_folder(tmp_path, monkeypatch):
    from movielens_folder import write_movielens

    write_movielens(tmp_path / "mydata")
    monkeypatch.chdir(tmp_path)
    nb = _nb(tmp_path / "nbs" if (tmp_path / "nbs").mkdir() is None else None, """
```{code-cell} ipython3
:tags: [parameters]

dataset = "sim-ml100k"
```

```{code-cell} ipython3
import os
from itemsampling.book import record
record("seen", dataset)
record("is_dir", os.path.isdir(dataset))
```
""")
    payload = run_notebook(nb, {"dataset": "mydata"}, tmp_path / "o", progress=False)
    assert payload["results"] == {"seen": str(tmp_path / "mydata"), "is_dir": True}
    ds = payload["datasets"]["dataset"]
    assert ds["kind"] == "folder" and ds["path"] == str(tmp_path / "mydata")
    import hashlib

    data = (tmp_path / "mydata" / "ml-small" / "ratings.dat").read_bytes()
    assert ds["files"] == [{"name": "ratings.dat", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}]


# ---------------------------------------------------------------------------------------------
# failures keep the good results
# ---------------------------------------------------------------------------------------------
FAILS_LATE = """
```{code-cell} ipython3
:tags: [parameters]

x = 2
fail = False
```

```{code-cell} ipython3
from itemsampling.book import record
record("square", x * x)
```

```{code-cell} ipython3
if fail:
    raise ValueError("requested failure")
record("done", 1)
```
"""


def test_failing_rerun_keeps_the_earlier_results(tmp_path):
    nb = _nb(tmp_path, FAILS_LATE)
    out = tmp_path / "o"
    good = run_notebook(nb, {"x": 3}, out, progress=False)
    assert good["results"] == {"square": 9, "done": 1}
    before = (out / "results.json").read_bytes()
    before_nb = (out / "nb.ipynb").read_bytes()
    with pytest.raises(RuntimeError, match="requested failure"):
        run_notebook(nb, {"x": 5, "fail": True}, out, progress=False)
    assert (out / "results.json").read_bytes() == before
    assert (out / "nb.ipynb").read_bytes() == before_nb
    failed = json.loads((out / "results.failed.json").read_text())
    assert failed["results"] == {"square": 25}          # the partial records of the failed run
    assert failed["parameters"]["x"] == 5 and "requested failure" in failed["error"]
    assert (out / "nb.failed.ipynb").exists()
    assert not (out / "results.partial.json").exists()
    # a later good run replaces the results and clears the failure files
    run_notebook(nb, {"x": 4}, out, progress=False)
    assert json.loads((out / "results.json").read_text())["results"] == {"square": 16, "done": 1}
    assert not (out / "results.failed.json").exists() and not (out / "nb.failed.ipynb").exists()


# ---------------------------------------------------------------------------------------------
# terminal: progress through, warnings out; --list-params
# ---------------------------------------------------------------------------------------------
NOISY = """
```{code-cell} ipython3
:tags: [parameters]

steps = 3                   # n = m + 1 steps (an "=" in a comment, which papermill's parser warns about)
```

```{code-cell} ipython3
import warnings
from tqdm import tqdm
for _ in tqdm(range(steps), desc="long work"):
    pass
warnings.warn("a warning from a cell")
print("to stdout")
```
"""


def test_progress_reaches_the_terminal_and_warnings_do_not(tmp_path):
    nb = _nb(tmp_path, NOISY)
    out = tmp_path / "o"
    proc = subprocess.run([sys.executable, "-m", "itemsampling.run", str(nb), "--out", str(out), "--no-html",
                           "-p", "steps", "4"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "long work" in proc.stderr and "4/4" in proc.stderr
    assert "Warning" not in proc.stderr and "WARNING" not in proc.stderr and "a warning from a cell" not in proc.stderr
    assert "Unable to parse" not in proc.stderr and "unknown parameter" not in proc.stderr
    # the warning stays in the executed notebook
    assert "a warning from a cell" in (out / "nb.ipynb").read_text()
    quiet = subprocess.run([sys.executable, "-m", "itemsampling.run", str(nb), "--out", str(out), "--no-html",
                            "--no-progress"], capture_output=True, text=True)
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_cli_refuses_a_wrong_type_naming_the_parameter(tmp_path):
    nb = _nb(tmp_path, TYPED)
    proc = subprocess.run([sys.executable, "-m", "itemsampling.run", str(nb), "-p", "n_repeats", "abc",
                           "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "n_repeats" in proc.stderr and "'abc'" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o" / "nb.ipynb").exists()


def test_list_params_prints_defaults_and_comments(tmp_path):
    nb = _nb(tmp_path, TYPED)
    proc = subprocess.run([sys.executable, "-m", "itemsampling.run", "--list-params", str(nb)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = {ln.split()[0]: ln for ln in proc.stdout.splitlines()[1:]}
    assert list(lines)[:3] == ["n_repeats", "rate", "replacement"]
    assert "100" in lines["n_repeats"] and "# repetitions" in lines["n_repeats"]
    assert '"sim-ml100k"' in lines["dataset"] and "# the data set" in lines["dataset"]
    assert "n_repeats // 2" in lines["derived"]


def test_list_params_of_a_chapter_by_number():
    from itemsampling.run import notebook_parameters, resolve_notebook

    assert resolve_notebook("6").name.startswith("06-") and resolve_notebook(6) == resolve_notebook("06")
    params = notebook_parameters(6)
    assert params["sample_size"].default == 100 and params["dataset"].default == "sim-ml1m"
    with pytest.raises(ValueError, match="no chapter 99"):
        resolve_notebook(99)


# ---------------------------------------------------------------------------------------------
# the rendered page
# ---------------------------------------------------------------------------------------------
GLUED = """
```{code-cell} ipython3
:tags: [parameters]

n_items = 25_815
```

```{code-cell} ipython3
:tags: [remove-cell]
from itemsampling.book import record, record_text
record("n_items_glued", n_items)
record_text("sentence", f"a catalog of **{n_items:,} items**")
```

The catalog has {glue:text}`n_items_glued:,` items; in words, {glue:md}`sentence`.
"""


def test_html_page_has_the_glued_values_of_the_rerun(tmp_path):
    nb = _nb(tmp_path, GLUED)
    out = tmp_path / "o"
    proc = subprocess.run([sys.executable, "-m", "itemsampling.run", str(nb), "-p", "n_items", "1234567",
                           "--out", str(out), "--no-progress"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    page = (out / "nb.html").read_text()
    text = re.sub(r"<[^>]+>", "", page)
    assert "The catalog has 1,234,567 items" in text
    assert "a catalog of 1,234,567 items" in text
    assert "25,815" not in text and "glue:" not in text
    assert (out / "_static").is_dir()
    assert json.loads((out / "results.json").read_text())["html"] == "nb.html"
    # the page offers its notebook once, and the file is there, with the rerun's values as text
    import nbformat

    offered = re.findall(r'href="([^"#]+\.ipynb)"', page)
    assert len(offered) == 1, offered
    downloaded = nbformat.read(out / offered[0], as_version=4)
    text = "\n".join(c.source for c in downloaded.cells if c.cell_type == "markdown")
    assert "The catalog has 1,234,567 items; in words, a catalog of **1,234,567 items**." in text
    # results.json is readable like the run's other outputs (mkstemp would leave it 0600)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (out / "results.json", out / "nb.ipynb", out / "nb.html")}
    assert len(set(modes.values())) == 1 and modes["results.json"] & 0o044 == 0o044, modes


def test_the_page_built_in_this_process_is_the_child_process_page(tmp_path):
    """render_html builds the page in the caller's process by default; the page and every asset it writes are
    byte for byte those of ``jupyter-book build`` in a child process (``in_process=False``), built twice in one
    process too (no state of the first build leaks into the second); a build that fails in the process raises
    with the build's log and leaves the working folder as it was."""
    import filecmp
    import os
    import shutil
    from pathlib import Path

    from itemsampling.run import render_html

    run_notebook(_nb(tmp_path, GLUED), {"n_items": 1234567}, tmp_path / "run", progress=False)
    ipynb = tmp_path / "run" / "nb.ipynb"
    outs = {}
    for key, here in (("child", False), ("here", True), ("here again", True)):
        outs[key] = tmp_path / key.replace(" ", "-")
        outs[key].mkdir()
        assert render_html(ipynb, outs[key], in_process=here) == outs[key] / "nb.html"

    def files(folder):
        return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())

    assert "The catalog has 1,234,567 items" in re.sub(r"<[^>]+>", "", (outs["here"] / "nb.html").read_text())
    for key in ("here", "here again"):
        assert files(outs[key]) == files(outs["child"])
        _, differ, errors = filecmp.cmpfiles(outs["child"], outs[key], files(outs["child"]), shallow=False)
        assert differ == [] and errors == [], (key, differ, errors)
    repo = tmp_path / "repo"
    (repo / "book").mkdir(parents=True)
    root = Path(__file__).resolve().parents[1]
    shutil.copy(root / "_config.yml", repo / "_config.yml")
    config = (repo / "_config.yml").read_text()
    assert "- itemsampling.handout" in config
    (repo / "_config.yml").write_text(config.replace("- itemsampling.handout", "- no_such_extension_x"))
    (tmp_path / "broken").mkdir()
    here = os.getcwd()
    with pytest.raises(RuntimeError, match=r"(?s)rendering nb.ipynb as HTML failed:.*no_such_extension_x"):
        render_html(ipynb, tmp_path / "broken", repo=repo)
    assert os.getcwd() == here
