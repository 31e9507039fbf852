"""The running service: the Kafka loop, partition tasks, snapshots scheduling, publishing."""

from processor.service.processor import Processor
from processor.service.settings import ServiceSettings, load_settings

__all__ = ["Processor", "ServiceSettings", "load_settings"]
