package vllmtest

// Log tails of crashed vLLM v0.11 servers as the kubelet returns them (`kubectl logs
// --previous`; the fake vLLM of test/localcluster prints the same): a process prefix on the
// server's lines, none on argparse's.
const (
	LogBadArgument = `usage: vllm serve [model_tag] [options]
vllm serve: error: unrecognized arguments: --foo
`
	LogGPUOOM = `(EngineCore_DP0 pid=250) INFO 12-03 15:04:05 [gpu_model_runner.py:2602] Starting to load model meta-llama/Llama-3.1-70B-Instruct...
(EngineCore_DP0 pid=250) ERROR 12-03 15:04:09 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=250) Traceback (most recent call last):
(EngineCore_DP0 pid=250)   File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/model_loader/default_loader.py", line 264, in load_weights
(EngineCore_DP0 pid=250)     loaded_weights = model.load_weights(
(EngineCore_DP0 pid=250)   File "/usr/local/lib/python3.12/dist-packages/torch/utils/_device.py", line 104, in __torch_function__
(EngineCore_DP0 pid=250)     return func(*args, **kwargs)
(EngineCore_DP0 pid=250) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.21 MiB is free. Including non-PyTorch memory, this process has 79.19 GiB memory in use. Of the allocated memory 78.94 GiB is allocated by PyTorch, and 48.83 MiB is reserved by PyTorch but unallocated.
(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File "/usr/local/bin/vllm", line 10, in <module>
(APIServer pid=1)     sys.exit(main())
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 880, in wait_for_engine_startup
(APIServer pid=1)     raise RuntimeError("Engine core initialization failed. "
(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
`
	LogMissingWeights = `(APIServer pid=1) INFO 12-03 15:04:05 [utils.py:233] non-default args: {'model': '/models/llama'}
(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File "/usr/local/bin/vllm", line 10, in <module>
(APIServer pid=1)     sys.exit(main())
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/config.py", line 633, in get_config
(APIServer pid=1)     raise ValueError(
(APIServer pid=1) ValueError: Invalid repository ID or local directory specified: '/models/llama'.
(APIServer pid=1) Please verify the following requirements:
(APIServer pid=1) 1. Provide a valid Hugging Face repository ID.
(APIServer pid=1) 2. Specify a local directory that contains a recognized configuration file.
(APIServer pid=1)    - For Hugging Face models: ensure the presence of a 'config.json'.
(APIServer pid=1)    - For Mistral models: ensure the presence of a 'params.json'.
`
	LogNoConfigJSON = `INFO 12-03 15:04:05 [api_server.py:1842] vLLM API server version 0.6.3
Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/transformers/utils/hub.py", line 403, in cached_file
    resolved_file = hf_hub_download(
  File "/usr/local/lib/python3.12/dist-packages/transformers/configuration_utils.py", line 689, in _get_config_dict
    resolved_config_file = cached_file(
    ^^^^^^^^^^^^^^^^^^^^^
OSError: /models/llama does not appear to have a file named config.json. Checkout 'https://huggingface.co//models/llama/tree/None' for available files.
`
	// The engine dies while serving: the root cause first, then the API server's own error
	// pointing at it, then uvicorn's shutdown.
	LogEngineDead = `(APIServer pid=1) INFO:     127.0.0.1:50412 - "GET /health HTTP/1.1" 200 OK
(EngineCore_DP0 pid=250) ERROR 12-03 15:04:05 [core.py:710] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=250) Traceback (most recent call last):
(EngineCore_DP0 pid=250)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core
(EngineCore_DP0 pid=250)     engine_core.run_busy_loop()
(EngineCore_DP0 pid=250) RuntimeError: CUDA error: an illegal memory access was encountered
(EngineCore_DP0 pid=250) CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
(EngineCore_DP0 pid=250) For debugging consider passing CUDA_LAUNCH_BLOCKING=1
(APIServer pid=1) ERROR 12-03 15:04:05 [async_llm.py:480] AsyncLLM output_handler failed.
(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", line 439, in output_handler
(APIServer pid=1)     outputs = await engine_core.get_output_async()
(APIServer pid=1) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
(APIServer pid=1) INFO:     Shutting down
(APIServer pid=1) INFO:     Application shutdown complete.
(APIServer pid=1) INFO:     Finished server process [1]
`
	// A tail that starts inside the traceback: no "Traceback" header, frames first.
	LogCutTraceback = `(APIServer pid=1)     raise ValueError(
(APIServer pid=1) ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.
`
	// Killed by the kernel mid-load: no exception, the last line is where it was.
	LogOOMKilled = `(APIServer pid=1) INFO 12-03 15:04:05 [model.py:1510] Using max model len 131072
(EngineCore_DP0 pid=250) INFO 12-03 15:04:06 [gpu_model_runner.py:2602] Starting to load model m...
(EngineCore_DP0 pid=250) Loading safetensors checkpoint shards:  33% Completed | 1/3 [00:01<00:02,  1.10s/it]
`
	LogBindFailed = `(APIServer pid=1) INFO:     Waiting for application startup.
(APIServer pid=1) INFO:     Application startup complete.
(APIServer pid=1) ERROR:    [Errno 98] error while attempting to bind on address ('127.16.0.5', 8000): address already in use
`
	// Python's chained exceptions: the last one raised is the one that ended the process.
	LogChained = `Traceback (most recent call last):
  File "/app/main.py", line 3, in <module>
    import vllm
ModuleNotFoundError: No module named 'vllm._C'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/main.py", line 5, in <module>
    raise ImportError("vllm is not built for this CUDA version")
ImportError: vllm is not built for this CUDA version
`
)
