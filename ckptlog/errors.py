"""Errors of the client library; all subclass CkptlogError so one `except` catches ckptlog."""

from __future__ import annotations

from processor.errors import CkptlogError


class ClientError(CkptlogError):
    """A client (Reporter, Evaluator, Reader) cannot do what was asked."""


class InvalidEvent(ClientError):
    """An event body would be rejected by the processor; raised before anything is sent."""


class ClientClosed(ClientError):
    """The client was used before `start()` / after `close()`."""


class FunctionLoadError(ClientError):
    """`--fn module:function` does not name an importable callable."""
