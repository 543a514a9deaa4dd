"""Plug-ins: a model or a data set named by ``"package.module:function"`` instead of a built-in name.

A plug-in string names a function that the trainer calls with the run's :class:`~.config.RunConfig`:

- ``model = "mylab.nets:wide_mlp"``: ``wide_mlp(config) -> torch.nn.Module`` (logits of shape
  ``(B, classes)`` for images ``(B, 3, 32, 32)``). The default init is drawn from ``config.seed``;
  alpha scales it by parameter group (:mod:`.models`).
- ``dataset = "mylab.data:my_pools"``: ``my_pools(config) -> (train_x, train_y, test_x, test_y)``,
  uint8 images ``(n, 3, 32, 32)`` and integer labels: the official training pool (split into train /
  validation by ``split_seed`` like every data set) and the test pool (:mod:`.data`).

The string is checked for its shape when a config is validated (no import: configs stay light) and
resolved where the run is trained (a sweep worker, on SLURM or Ray too, imports the module itself); a
module or function that cannot be found raises :class:`PluginError` naming the string and the reason.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

#: ``package.module:function``: dotted module path, one colon, a function name.
PLUGIN_PATTERN = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")


class PluginError(ValueError):
    """A plug-in string whose module or function cannot be found (or is not callable)."""


def is_plugin(name: str) -> bool:
    """Whether ``name`` is a plug-in string (it holds a colon) rather than a built-in name."""
    return isinstance(name, str) and ":" in name


def plugin_problem(name: str) -> str | None:
    """Why ``name`` is not a well-formed plug-in string, or None."""
    if PLUGIN_PATTERN.match(name):
        return None
    return f"{name!r} is not of the form 'package.module:function'"


def resolve_plugin(name: str, field: str) -> Callable:
    """The function that ``name`` (``package.module:function``) names; ``field`` names the config
    field in the error message."""
    problem = plugin_problem(name)
    if problem:
        raise PluginError(f"{field}: {problem}")
    module_name, function_name = name.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if (
            err.name is not None
            and err.name != module_name
            and not module_name.startswith(f"{err.name}.")
        ):  # the module is there; something it imports is not
            raise PluginError(
                f"{field} = {name!r}: module {module_name!r} imports {err.name!r}, which is not "
                f"installed in the process that trains (pip install it there)"
            ) from err
        raise PluginError(
            f"{field} = {name!r}: cannot import module {module_name!r} ({err}); is it on the "
            "Python path of the process that trains (PYTHONPATH, an installed package)?"
        ) from err
    except SyntaxError as err:
        raise PluginError(
            f"{field} = {name!r}: module {module_name!r} has a syntax error ({err.msg}, "
            f"{err.filename} line {err.lineno})"
        ) from err
    except Exception as err:  # noqa: BLE001 - the plug-in's own code raised while it was imported
        raise PluginError(
            f"{field} = {name!r}: importing module {module_name!r} raised {type(err).__name__}: "
            f"{' '.join(str(err).split())[:200]}"
        ) from err
    function = getattr(module, function_name, None)
    if function is None:
        raise PluginError(f"{field} = {name!r}: module {module_name!r} has no {function_name!r}")
    if not callable(function):
        raise PluginError(f"{field} = {name!r}: {function_name!r} is not callable")
    return function


def call_plugin(function: Callable, config: Any, field: str) -> Any:
    """``function(config)``; an exception the plug-in raises becomes a :class:`PluginError` naming the
    field, the plug-in and the exception, in one line (``--debug`` shows its traceback: the cause)."""
    try:
        return function(config)
    except PluginError:
        raise
    except Exception as err:  # noqa: BLE001 - the user's code: named, not a traceback
        name = getattr(config, field, "?")
        raise PluginError(
            f"{field} = {name!r}: the plug-in raised {type(err).__name__}: "
            f"{' '.join(str(err).split())[:200]}"
        ) from err


__all__ = [
    "PLUGIN_PATTERN",
    "PluginError",
    "call_plugin",
    "is_plugin",
    "plugin_problem",
    "resolve_plugin",
]
