"""What is known before anything runs, each fact with its source: the GPUs (compute capability, native precisions,
the driver each CUDA needs), SageMaker's hosting instance types (accelerators, memory, local NVMe) and how big a
model is. The config (endpoint_config) and the serving systems (systems) both read these; this package reads
neither."""
