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
