"""The book's figures are sharp: set_style makes IPython display figures as retina PNGs."""

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from PIL import Image  # noqa: E402

from itemsampling import plotting  # noqa: E402


def test_retina_png_in_ipython():
    shell = InteractiveShell.instance()
    try:
        plotting.set_style()
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.plot([0, 1], [0, 1])
        data, metadata = shell.display_formatter.format(fig)
        png = base64.b64decode(data["image/png"]) if isinstance(data["image/png"], str) else data["image/png"]
        width, height = Image.open(io.BytesIO(png)).size
        # twice the pixels of the 100-dpi figure, displayed at the figure's size
        assert metadata["image/png"]["width"] == pytest.approx(width / 2, abs=1)
        assert width >= 2 * 4 * 100 * 0.9
        plt.close(fig)
    finally:
        InteractiveShell.clear_instance()


def test_sharp_inline_figures_outside_ipython_and_bad_format():
    assert plotting.sharp_inline_figures() is False
    with pytest.raises(ValueError, match="fmt must be"):
        plotting.sharp_inline_figures("jpeg")


@pytest.mark.parametrize("context", ["notebook", "paper"])
def test_style_is_seaborns_whitegrid_theme_without_importing_seaborn(context):
    """set_style writes out seaborn's set_theme(context, "whitegrid", Okabe-Ito, font_scale=1.05) as matplotlib
    settings: every setting the two make equal (the one left out, seaborn's colour map "rocket", is
    matplotlib's default instead), the colour cycle the palette's, and itemsampling.plotting imports no seaborn."""
    import subprocess
    import sys

    import matplotlib as mpl
    import seaborn as sns

    saved = mpl.rcParams.copy()
    try:
        mpl.rcdefaults()
        plotting.set_style(context)
        ours = dict(mpl.rcParams)
        mpl.rcdefaults()
        sns.set_theme(context=context, style="whitegrid", palette=plotting.OKABE_ITO[:7], font_scale=1.05)
        mpl.rcParams.update(plotting.BOOK_RC)  # the book's own settings on top, as set_style puts them
        theirs = dict(mpl.rcParams)
    finally:
        mpl.rcParams.update(saved)
    differ = {k for k in theirs if ours[k] != theirs[k]}
    assert differ == {"image.cmap"} and theirs["image.cmap"] == "rocket" and ours["image.cmap"] == "viridis"
    assert ours["axes.prop_cycle"] == plt.cycler("color", [tuple(c) for c in sns.color_palette(plotting.OKABE_ITO[:7])])
    assert plotting.palette(3) == [tuple(c) for c in sns.color_palette(plotting.OKABE_ITO[:3])]
    assert plotting.color_for("a model of this test") in plotting.palette(7)
    out = subprocess.run([sys.executable, "-c", "import sys, itemsampling.plotting as p; p.set_style(); "
                          "print('seaborn' in sys.modules)"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
