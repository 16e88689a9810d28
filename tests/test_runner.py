"""The reader's runner: parameters injected, results written, failures and bad names reported."""

import json
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
                           "--out", str(out), "--no-progress"], capture_output=True, text=True)
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
                           "--no-progress"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "boom" in proc.stderr
