"""Where pslbridge keeps what it downloads: the PSL jar and the data sets, in the user's cache.

Resolution: ``PSLBRIDGE_CACHE`` if set, else ``$XDG_CACHE_HOME/pslbridge``, else ``~/.cache/pslbridge``. The
jar folder (``PSLBRIDGE_JAR_DIR``) and the data folder (``PSLBRIDGE_DATA``) can each be pointed elsewhere; the
repository's Makefile points them at its own ``jars/`` and ``data/cache/`` folders.

Examples:
    >>> import os
    >>> saved = {k: os.environ.pop(k, None) for k in ("PSLBRIDGE_CACHE", "PSLBRIDGE_DATA")}
    >>> os.environ["PSLBRIDGE_CACHE"] = "/tmp/pslbridge-cache-doc"
    >>> cache_root().as_posix(), data_dir().as_posix()
    ('/tmp/pslbridge-cache-doc', '/tmp/pslbridge-cache-doc/data')
    >>> os.environ.update({k: v for k, v in saved.items() if v is not None}); _ = os.environ.pop("PSLBRIDGE_CACHE")
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root", "data_dir"]


def cache_root() -> Path:
    """Return pslbridge's cache folder (not created).

    Returns:
        ``PSLBRIDGE_CACHE``, else ``$XDG_CACHE_HOME/pslbridge``, else ``~/.cache/pslbridge``.

    Examples:
        >>> cache_root() == Path(os.environ.get("PSLBRIDGE_CACHE", cache_root()))
        True
    """
    explicit = os.environ.get("PSLBRIDGE_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "pslbridge"


def data_dir() -> Path:
    """Return the folder for downloaded and generated data sets (not created).

    Returns:
        ``PSLBRIDGE_DATA``, else ``<cache_root()>/data``.

    Examples:
        >>> data_dir() == Path(os.environ["PSLBRIDGE_DATA"]) if "PSLBRIDGE_DATA" in os.environ else True
        True
    """
    explicit = os.environ.get("PSLBRIDGE_DATA")
    return Path(explicit).expanduser() if explicit else cache_root() / "data"
