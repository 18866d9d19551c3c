"""Launch scripts: Cloud TPU VM pods (create, install, launch, logs, delete) and multi-node GPU (gpu_launch)."""
