"""The compiled parts of the add path: the bookie's (storage/bookie/addpath.pyx) and the
client's (storage/bookie_client/addacks.pyx), both on storage/bookie/addpath_crc.h; and the
bookie bench's lean load generator (bench/leanloop.pyx) and bookie floor
(bench/bookiefloor.pyx, also on that header). Everything else is declared in pyproject.toml."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("storage.bookie.addpath", ["storage/bookie/addpath.pyx"],
                   include_dirs=["storage/bookie"], extra_compile_args=["-O2"]),
         Extension("storage.bookie_client.addacks", ["storage/bookie_client/addacks.pyx"],
                   include_dirs=["storage/bookie"], extra_compile_args=["-O2"]),
         Extension("bench.leanloop", ["bench/leanloop.pyx"], extra_compile_args=["-O2"]),
         Extension("bench.bookiefloor", ["bench/bookiefloor.pyx"],
                   include_dirs=["storage/bookie"], extra_compile_args=["-O2"])],
        compiler_directives={"language_level": "3"},
    ),
)
