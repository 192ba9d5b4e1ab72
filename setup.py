"""Map the top-level frontends/ and backends/ folders into the byoc namespace.

pyproject.toml holds everything else; only the package list needs code, since setuptools'
automatic discovery would install frontends/ and backends/ as top-level packages.
"""

from setuptools import find_packages, setup

FOLDERS = {"byoc": "byoc", "byoc.frontends": "frontends", "byoc.backends": "backends"}
packages, package_dir = [], {}
for package, folder in FOLDERS.items():
    package_dir[package] = folder
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=package_dir)
