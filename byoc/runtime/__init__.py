"""Running modules: the host executor and its instruction plans."""

from .executor import Executable, build, check_inputs

__all__ = ["Executable", "build", "check_inputs"]
