"""presk-kernel: PSK-Kernel loop nests: fusion, the kernel interpreter, layout spaces."""

__version__ = "0.1.0"
