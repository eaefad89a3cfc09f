"""Sphinx configuration of refit's documentation site: the user guide (docs/guide/), the facts the
code relies on (docs/*.md), the JSON schemas of the file formats (docs/schemas/) and the API
reference (docs/api/): C++ from Doxygen's XML through breathe, Python from the package's
docstrings through autodoc.

The tests/docs ctest builds it with warnings as errors (a broken link, a missing anchor or an
undocumented reference fails ./test):

    REFIT_DOXYGEN_OUT=build/docs/doxygen doxygen docs/Doxyfile
    REFIT_DOXYGEN_XML=build/docs/doxygen/xml python -m sphinx -W --keep-going docs build/docs/html
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The pure-Python package, read from the source tree; its compiled module is only imported by
# functions, so the reference needs no build of it.
sys.path.insert(0, str(ROOT / "python"))

project = "refit"
author = "the refit developers"
copyright = "the refit developers"
release = "0.1.0"

# napoleon: the package's docstrings are Google style (Args:, Returns:, Raises:, Attributes:).
extensions = ["myst_parser", "breathe", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Every heading down to level 4 gets the anchor GitHub gives it, so that a link such as
# predicting.md#deployments works on GitHub and in the site, and a missing one is a warning.
myst_heading_anchors = 4
myst_enable_extensions = ["deflist"]

breathe_projects = {"refit": os.environ.get("REFIT_DOXYGEN_XML", str(ROOT / "build/docs/doxygen/xml"))}
breathe_default_project = "refit"
breathe_default_members = ("members",)
# Each header's page section opens its namespace (refit) again; that repeat is the only duplicate
# C++ declaration the reference can have, since every other one belongs to exactly one header.
suppress_warnings = ["duplicate_declaration.cpp"]

autodoc_mock_imports = ["refit._refit"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"

html_theme = "furo"
html_title = "refit"
