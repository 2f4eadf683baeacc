"""The compiled part of the bookie's add path (storage/bookie/addpath.pyx); everything else is
declared in pyproject.toml."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("storage.bookie.addpath", ["storage/bookie/addpath.pyx"],
                   include_dirs=["storage/bookie"], extra_compile_args=["-O2"])],
        compiler_directives={"language_level": "3"},
    ),
)
