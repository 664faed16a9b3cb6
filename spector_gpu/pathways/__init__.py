"""spector_gpu subpackage."""
