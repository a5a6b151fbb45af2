"""Finding a pipeline plugin by name: the built-ins (`fll.pipeline.plugins`,
which register themselves with `fll.pipeline.api.register` when imported),
third-party packages' entry points of group ``fll.plugins``, or a dotted path.

The plugins build on `fll.pipeline.api`; this module sits above both and is
what loads the built-ins, so the api never imports its implementations.
"""
from __future__ import annotations

from importlib import metadata
from typing import Any

from ..errors import PipelineError
from . import plugins  # noqa: F401  (importing the package registers the built-ins)
from .api import KINDS, Plugin, load_object, registered_plugins

__all__ = ["ENTRY_POINT_GROUP", "builtin_plugins", "plugin_class"]

ENTRY_POINT_GROUP = "fll.plugins"


def builtin_plugins() -> dict[str, type[Plugin]]:
    """Registered plugins by name (built-ins plus any `register`ed class)."""
    return registered_plugins()


def plugin_class(name: str) -> type[Plugin]:
    """The plugin called ``name``: a registered name, an entry point of group
    ``fll.plugins``, or a dotted path ``package.module:Class`` / ``package.module.Class``."""
    known = builtin_plugins()
    if name in known:
        return known[name]
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            try:
                cls = ep.load()
            except Exception as e:  # a broken third-party package must not hide the name
                raise PipelineError(f"plugin {name!r}: entry point {ep.value!r} failed to "
                                    f"load: {e}") from e
            return _checked(cls, name)
    if "." in name or ":" in name:
        return _checked(load_object(name, "plugin"), name)
    raise PipelineError(f"unknown plugin {name!r} (built-in plugins: "
                        f"{', '.join(sorted(known))}; or an entry point of group "
                        f"{ENTRY_POINT_GROUP!r}, or a dotted path module:Class)")


def _checked(cls: Any, name: str) -> type[Plugin]:
    if not (isinstance(cls, type) and issubclass(cls, Plugin) and cls.kind in KINDS):
        raise PipelineError(f"plugin {name!r} is not a Source, Transform, Joiner or Sink "
                            f"subclass (got {cls!r})")
    return cls
