"""Labels now live in the shared vocabulary (``server.labels``): a memory's labels are a domain
object every layer reads (``server.models``, ``server.inputs``, the shapes), and the vocabulary
imports no room of the core.

Temporary: ``server.facade.service`` and ``server.memories`` still import from here while they are
being shrunk (issue 71); remove this module once they import ``server.labels``.
"""

from server.labels import Labels, check_origins, space_mark

__all__ = ["Labels", "check_origins", "space_mark"]
