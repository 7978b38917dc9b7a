"""What vulture reports as unused and is not: each name with the reason it stays.

Read by ``vulture`` (the ``lint`` tox env; its settings are ``[tool.vulture]`` in
``pyproject.toml``). A name listed here is used by something vulture cannot see: a
framework calling a hook by name, a protobuf field set by assignment, a dataclass field
read through ``fields()``, a function called by a name built at run time. Code that is
really dead is deleted, never listed here.
"""

# ruff: noqa: B018, F821
# mypy: ignore-errors

# -- framework hooks: called by the framework, by name --------------------------------------
_.log_hyperparams  # lightning Logger API (collector/lightning.py)
_.log_graph  # lightning Logger API
input_array  # lightning Logger.log_graph's parameter, part of its signature
_.log_metrics  # lightning Logger API
_.after_save_checkpoint  # lightning Logger API
_.on_train_start  # lightning Callback hook
_.on_train_epoch_start  # lightning Callback hook
_.on_train_batch_start  # lightning Callback hook
batch_idx  # lightning Callback hooks' parameter, part of their signature
_.on_train_batch_end  # lightning Callback hook
_.on_train_epoch_end  # lightning Callback hook
_.on_validation_end  # lightning Callback hook
_.on_exception  # lightning Callback hook (a fit that raises)
_.on_train_end  # lightning and transformers Callback hook; MindSpore's (lineage callbacks)
_.validation_step  # lightning LightningModule hook (examples/lightning/train.py)
_.configure_optimizers  # lightning LightningModule hook (examples/lightning/train.py)
_.on_train_begin  # transformers TrainerCallback hook; MindSpore's (lineage callbacks)
_.on_epoch_begin  # transformers TrainerCallback hook
_.on_step_begin  # transformers TrainerCallback hook
_.on_step_end  # transformers TrainerCallback hook
_.on_epoch_end  # transformers TrainerCallback hook
_.on_log  # transformers TrainerCallback hook
_.on_evaluate  # transformers TrainerCallback hook
_.on_save  # transformers TrainerCallback hook
control  # transformers TrainerCallback hooks' parameter, part of their signature
_.on_eval_end  # MindSpore Callback hook (lineage/record/_callbacks.py)
requires_logging_directory  # accelerate GeneralTracker class attribute, read by accelerate
main_process_only  # accelerate GeneralTracker class attribute, read by accelerate
_.parameters_and_names  # MindSpore Cell API, duck-typed by the collector (tests' networks)
_.cells_and_names  # MindSpore Cell API: where the optimizer search looks (tests' cells)
exc_info  # the parameter of a context manager's __exit__, part of its signature
exitstatus  # pytest_sessionfinish's parameter, part of pytest's hook signature (tests)
_.exitstatus  # pytest's Session.exitstatus, set to fail the run (tests/conftest.py)

# -- fields set by assignment or read through dataclasses.fields() --------------------------
_.bool_value  # protobuf field (TensorBoard HParams), set by assignment (lineage/_hparams.py)
_.start_time_secs  # protobuf field (TensorBoard HParams session start)
_.end_time_secs  # protobuf field (TensorBoard HParams session end)
_.time_created_secs  # protobuf field (TensorBoard HParams experiment)
loss_function  # lineage model dataclass field, read through fields() (record/_model.py)
train_dataset_path  # lineage model dataclass field, read through fields()
train_dataset_size  # lineage model dataclass field, read through fields()
valid_dataset_path  # lineage model dataclass field, read through fields()
valid_dataset_size  # lineage model dataclass field, read through fields()
_.loss_function  # the same fields, set on a model in tools/bench/lineage.py
_.train_dataset_path  # the same, tools/bench/lineage.py
_.train_dataset_size  # the same, tools/bench/lineage.py
_.valid_dataset_path  # the same, set in tests
_.valid_dataset_size  # the same, set in tests
_.dataset_file  # a dataset's attribute the collector reads with getattr (tests/collector)
dataset_dir  # a dataset's attribute the lineage callbacks read with getattr (tests/lineage)

# -- keys of the verdict records' TypedDicts (jobview/job/verdicts/_record_types.py): the
# records are dicts written with these keys as strings, which vulture does not match ----------
cost_seconds_per_step  # CostlyRank, StragglerRecord, VerdictRecord key
period_steps  # StragglerRecord key
cost_basis  # StragglerRecord key
until_step  # StragglerRecord key (an ended verdict)
ended_step  # StragglerRecord key (an ended verdict)

# -- called by a name vulture cannot follow --------------------------------------------------
_close_live_records  # registered with @atexit.register (writer/record/_lifetime.py)
_say_unended_runs  # registered with @atexit.register (collector/frameworks/_driver.py)
_.__getattr__  # PEP 562 module hook, set on a module object (tests/ranks/test_lazy_attributes.py)
_.__dir__  # PEP 562 module hook, the same
mismatch  # a worker function chosen by its name on the command line (tests/ranks/file_worker.py)
adapter_modules  # a fixture requested by parameter name (tests/collector/test_adapters.py)
permissive_umask  # a fixture requested by parameter name (tests/ranks/test_layout.py)
FileSignature  # the type alias the index file's column of file signatures is documented with

# -- state of the live job view, written for its protocol (jobview/job/_rank_view.py) -------------
_._round  # the round a rank's live sender is in; kept with the live view's protocol
_._failed  # whether the live sender gave up; kept with the live view's protocol

# -- zipfile.ZipInfo fields the tests' own container writer sets (zipfile reads them) ------
_.create_system  # zipfile writes it into the member's directory entry
_.external_attr  # zipfile writes it into the member's directory entry (the mode)

# -- tools/fake_nvml.py mirrors NVML's real API, names and arguments included --------------
nvmlClocksEventReasonNone  # a constant of the real module, kept so the fake has its names
nvmlClocksThrottleReasonNone  # a constant of the real module, kept so the fake has its names
sensor  # nvmlDeviceGetTemperature's argument in the real API (the fake has one sensor)
NVML_CLOCK_GRAPHICS  # real NVML name
NVML_CLOCK_MEM  # real NVML name
nvmlClocksEventReasonApplicationsClocksSetting  # real NVML name
nvmlClocksEventReasonDisplayClockSetting  # real NVML name
nvmlClocksEventReasonGpuIdle  # real NVML name
nvmlClocksEventReasonSwPowerCap  # real NVML name
nvmlClocksEventReasonSwThermalSlowdown  # real NVML name
nvmlClocksEventReasonSyncBoost  # real NVML name
nvmlClocksThrottleReasonApplicationsClocksSetting  # real NVML name
nvmlClocksThrottleReasonDisplayClockSetting  # real NVML name
nvmlClocksThrottleReasonGpuIdle  # real NVML name
nvmlClocksThrottleReasonHwPowerBrakeSlowdown  # real NVML name
nvmlClocksThrottleReasonHwSlowdown  # real NVML name
nvmlClocksThrottleReasonHwThermalSlowdown  # real NVML name
nvmlClocksThrottleReasonSwPowerCap  # real NVML name
nvmlClocksThrottleReasonSwThermalSlowdown  # real NVML name
nvmlClocksThrottleReasonSyncBoost  # real NVML name
_.handle_starttag  # html.parser.HTMLParser callback (tests/report/test_table.py)
_.handle_data  # html.parser.HTMLParser callback (tests/report/test_table.py)
_.handle_endtag  # html.parser.HTMLParser callback (tests/report/test_table.py)
