"""The file formats of edgefl's figures (``--format`` of every command that draws, ``Result.plot(path=...)``,
``Result.save(plot_format=...)``) and the one function that writes a figure: the same figure gives the same
bytes in every format (no creation date, fixed SVG ids), and PDF text in TrueType fonts (Type 42), which
publishers' checks accept where they refuse matplotlib's default Type 3 fonts.

matplotlib is imported only when a figure is written (``import edgefl.cli`` stays cheap)."""

from __future__ import annotations

from pathlib import Path

FORMATS = ("png", "pdf", "svg")  # raster for screens and docs; vector for a paper
DEFAULT_FORMAT = "png"
DPI = 110  # every raster figure of edgefl; a PDF or SVG is drawn at the same size (7 x 3.8 in: 770 x 418 pixels)
# zlib level of the PNGs: 3 encodes in ~60 % of the time of PIL's default 6 (a 770 x 418 figure: 15 ms instead of
# 25 ms); the files are 5-15 % larger
PNG_COMPRESSION = 3


def format_problem(value) -> str | None:
    """Why ``value`` is no figure format (a sentence with the known ones and a hint), or None when it is one."""
    if isinstance(value, str) and value in FORMATS:
        return None
    return (
        f"unknown figure format {value!r}: expected one of {', '.join(FORMATS)} "
        "(pdf or svg for a paper: vector figures that scale without blur; png for screens and web pages)"
    )


def check_format(value, error: type[Exception] = ValueError) -> str:
    """``value`` when it is a figure format, else ``error`` with :func:`format_problem`'s sentence."""
    problem = format_problem(value)
    if problem is not None:
        raise error(problem)
    return value


def save_figure(fig, path, fmt: str | None = None, dpi: float = DPI, close: bool = True) -> Path:
    """Write ``fig`` to ``path`` in ``fmt`` (default: the suffix of ``path``) and close it (unless ``close`` is
    False). The bytes depend on the figure only: PDF and SVG carry no date, SVG ids are salted with a constant."""
    import matplotlib
    import matplotlib.pyplot as plt

    path = Path(path)
    fmt = check_format(fmt if fmt is not None else path.suffix.lstrip(".").lower())
    options: dict = {
        "png": {"pil_kwargs": {"compress_level": PNG_COMPRESSION}},
        "pdf": {"metadata": {"CreationDate": None}},
        "svg": {"metadata": {"Date": None}},
    }[fmt]
    try:
        with matplotlib.rc_context({"pdf.fonttype": 42, "svg.hashsalt": "edgefl"}):
            fig.savefig(path, format=fmt, dpi=dpi, **options)
    finally:
        if close:
            plt.close(fig)
    return path


def add_format_argument(parser) -> None:
    """``--format png|pdf|svg`` on a command that draws (argparse: a wrong value exits 2 with the hint of
    :func:`format_problem`, before any work)."""
    import argparse

    def figure_format(text: str) -> str:
        problem = format_problem(text.lower())
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return text.lower()

    parser.add_argument(
        "--format",
        dest="plot_format",
        type=figure_format,
        default=DEFAULT_FORMAT,
        metavar="|".join(FORMATS),
        help=f"file format of the figures (default {DEFAULT_FORMAT}; pdf or svg for a paper)",
    )
