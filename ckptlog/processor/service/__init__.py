"""The running service: the Kafka loop, partition tasks, snapshots scheduling, publishing.

Names are loaded on first use, so that importing a module of the package (its settings, say)
does not load the whole service and aiokafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptlog.processor.service.processor import Processor
    from ckptlog.processor.service.settings import ServiceSettings, load_settings

__all__ = ["Processor", "ServiceSettings", "load_settings"]


def __getattr__(name: str) -> Any:
    if name == "Processor":
        from ckptlog.processor.service.processor import Processor

        return Processor
    if name in ("ServiceSettings", "load_settings"):
        from ckptlog.processor.service import settings

        return getattr(settings, name)
    raise AttributeError(name)
