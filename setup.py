"""The packages are found, never listed by hand: ``eqsat`` and its subpackages, and the
top-level folders ``rules/`` and ``lowering/`` installed as ``eqsat.rules`` and
``eqsat.lowering`` (with theirs). Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

MAPPED = {"eqsat.rules": "rules", "eqsat.lowering": "lowering"}


def packages() -> list[str]:
    found = find_packages(include=["eqsat", "eqsat.*"])
    for name, folder in MAPPED.items():
        found += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]
    return found


setup(packages=packages(), package_dir={"eqsat": "eqsat", **MAPPED})
