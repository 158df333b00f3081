"""Builds the nxrt Python package through CMake (target nxrt_python) for `pip install .`.

The CMake build folder is build-pip/ (NXRT_PIP_BUILD_DIR overrides it); JOBS sets the parallelism
(default 2). The module is built for the interpreter pip runs under."""
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(nxrt VERSION ([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("CMakeLists.txt: no `project(nxrt VERSION x.y.z ...)`")
    return m.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("NXRT_PIP_BUILD_DIR", os.path.join(ROOT, "build-pip"))
        env = dict(os.environ, CCACHE_BASEDIR=ROOT)
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, *generator, "-DCMAKE_BUILD_TYPE=Release",
                        "-DNXRT_BUILD_TESTS=OFF", f"-DPython_EXECUTABLE={sys.executable}"], check=True, env=env)
        subprocess.run(["cmake", "--build", build_dir, "--target", "nxrt_python", "--parallel",
                        os.environ.get("JOBS", "2")], check=True, env=env)
        package = os.path.join(build_dir, "python", "nxrt")
        built = [f for f in os.listdir(package) if f.startswith("_nxrt.") and f.endswith(".so")]
        if len(built) != 1:
            raise RuntimeError(f"expected one _nxrt module in {package}, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(package, built[0]), target)


setup(
    version=project_version(),
    packages=["nxrt"],
    package_dir={"": "python"},
    package_data={"nxrt": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("nxrt._nxrt", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
