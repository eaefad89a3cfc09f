"""The C++ front door is documented: every declaration of refit/refit.h and refit/facade/ (the
functions, types, members and constants a program calls first) has a comment, as Doxygen read
it into the API reference (the docs_doxygen test writes its XML to REFIT_DOXYGEN_XML). The other
public headers of docs/Doxyfile are in the reference with whatever comments they have."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

FRONT_DOOR = ("facade/include/refit/refit.h", "facade/include/refit/facade/")


def xml_dir() -> Path:
    given = os.environ.get("REFIT_DOXYGEN_XML")
    if not given or not (Path(given) / "index.xml").exists():
        pytest.skip("no Doxygen XML (REFIT_DOXYGEN_XML; the docs_doxygen test writes it)")
    return Path(given)


def described(element: ET.Element) -> bool:
    """Whether Doxygen found a comment for the element."""
    return any("".join(element.find(tag).itertext()).strip() for tag in ("briefdescription", "detaileddescription")
               if element.find(tag) is not None)  # fmt: skip


def in_front_door(element: ET.Element) -> bool:
    location = element.find("location")
    return location is not None and any(part in location.get("file", "") for part in FRONT_DOOR)


def front_door_declarations() -> list[tuple[str, ET.Element]]:
    """(name, element) of every compound and member declared in the front door's headers."""
    found: list[tuple[str, ET.Element]] = []
    for path in sorted(xml_dir().glob("*.xml")):
        if path.name == "index.xml":
            continue
        for compound in ET.parse(path).getroot().iter("compounddef"):
            if compound.get("kind") in ("struct", "class") and in_front_door(compound):
                found.append((compound.findtext("compoundname", ""), compound))
            if compound.get("kind") not in ("struct", "class", "namespace", "file"):
                continue
            for member in compound.iter("memberdef"):
                if in_front_door(member) and member.get("prot", "public") == "public":
                    found.append((f"{compound.findtext('compoundname', '')}::{member.findtext('name', '')}", member))
    return found


def test_every_front_door_declaration_has_a_comment() -> None:
    declarations = front_door_declarations()
    assert declarations, "no declaration of the front door in the Doxygen XML"
    undocumented = sorted({name for name, element in declarations if not described(element)})
    assert not undocumented, "declarations of the front door without a comment:\n" + "\n".join(undocumented)
