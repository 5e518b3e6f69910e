"""Engine metrics (`engine_metrics:`, stacks/engine_metrics.py): a vllm endpoint on the variant, an sglang endpoint as
an inference component and an lmi-vllm endpoint, in one environment. The endpoint configs state MetricsConfig; the
vllm and sglang stacks get the PromQL saturation alarm on their engine's own series, selected by SageMaker's OTel
labels; the dashboard shows their engine panel and the alarm's state; the config refuses engine-metric scaling
with the reason; cfn-lint 1.58 passes the written templates."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hermetic import subprocess_env
from pydantic import ValidationError

from endpoint_config.engine_metrics import ENGINE_SCALING_REFUSAL, EngineMetrics
from stacks.engine_metrics import engine_queries, engine_series, spellings

ENGINE_SERIES = engine_series()

CONFIG = """\
project: llm-endpoints
environments:
  dev: {account: "111122223333", region: us-east-1}
endpoints:
  - name: em-vllm
    system: vllm
    model: meta-llama/Llama-3.1-8B-Instruct
    dtype: bf16
    instance_type: ml.g6e.xlarge
    volume_size_gb: null
    engine: {max_model_len: 8192}
    engine_metrics:
      publish_frequency_s: 30
      alarm: {queue_depth: 16, kv_cache_percent: 90, pending_s: 120}
  - name: em-sglang
    system: sglang
    model: meta-llama/Llama-3.1-8B-Instruct
    dtype: bf16
    instance_type: ml.g6e.xlarge
    volume_size_gb: null
    engine: {context_length: 8192}
    hosting: {mode: inference-components}
    engine_metrics: {alarm: {queue_depth: null}}
  - name: em-lmi
    system: lmi-vllm
    model: meta-llama/Llama-3.1-8B-Instruct
    dtype: bf16
    instance_type: ml.g6e.xlarge
    volume_size_gb: null
"""
VLLM, SGLANG, LMI = (f"llm-endpoints-dev-{n}" for n in ("em-vllm", "em-sglang", "em-lmi"))
ARTIFACTS = "llm-endpoints-dev-artifacts"


@pytest.fixture(scope="module")
def app(synth, tmp_path_factory):
    path = tmp_path_factory.mktemp("engine-metrics") / "engine-metrics.yaml"
    path.write_text(CONFIG)
    return synth(str(path), "dev")


def _one(app, stack: str, type_name: str) -> dict:
    [resource] = app.resources(stack, type_name)
    return resource["Properties"]


def _promql_alarms(app, stack: str) -> list[dict]:
    return [
        r["Properties"]
        for r in app.resources(stack, "AWS::CloudWatch::Alarm")
        if "EvaluationCriteria" in r["Properties"]
    ]


def test_every_endpoint_config_states_its_metrics_config(app):
    """MetricsConfig's three fields (botocore sagemaker MetricsConfig; cfn-lint's AWS::SageMaker::EndpointConfig)."""
    assert _one(app, VLLM, "AWS::SageMaker::EndpointConfig")["MetricsConfig"] == {
        "EnableDetailedObservability": True,
        "EnableEnhancedMetrics": False,
        "MetricPublishFrequencyInSeconds": 30,
    }
    for stack in (SGLANG, LMI):
        assert _one(app, stack, "AWS::SageMaker::EndpointConfig")["MetricsConfig"] == {
            "EnableDetailedObservability": True,
            "EnableEnhancedMetrics": False,
            "MetricPublishFrequencyInSeconds": 60,
        }


def test_the_vllm_alarm_reads_the_engines_queue_and_kv_cache_by_endpoint_label(app):
    [alarm] = _promql_alarms(app, VLLM)
    assert alarm["AlarmName"] == "dev-em-vllm-engine-saturation"
    assert alarm["EvaluationInterval"] == 60
    criteria = alarm["EvaluationCriteria"]["PromQLCriteria"]
    assert criteria["PendingPeriod"] == 120 and criteria["RecoveryPeriod"] == 300
    query = criteria["Query"]
    # Both spellings of each series (which one CloudWatch keeps is unverified), selected by the endpoint's label.
    for name in (*spellings("vllm:num_requests_waiting"), *spellings("vllm:kv_cache_usage_perc")):
        assert f"""{name}{{'aws.sagemaker.endpoint.name'="dev-em-vllm"}}""" in query, name
    assert ") > 16" in query and ") > 90" in query
    # The engine's own name, not the one vLLM 0.30.0 removed.
    assert "gpu_cache_usage_perc" not in query
    # To the endpoint's alarm topic, like its other alarms.
    [action] = alarm["AlarmActions"]
    topics = app.resources(VLLM, "AWS::SNS::Topic")
    assert len(topics) == 1 and "Ref" in action
    # No metric-alarm fields beside the PromQL criteria (PutMetricAlarm refuses them together).
    assert not {"MetricName", "Metrics", "Namespace", "Threshold", "ComparisonOperator"} & set(alarm)


def test_the_sglang_component_alarm_reads_sglangs_series_by_component_label(app):
    [alarm] = _promql_alarms(app, SGLANG)
    query = alarm["EvaluationCriteria"]["PromQLCriteria"]["Query"]
    assert "sglang:token_usage{" in query and "sglang_token_usage{" in query
    assert "num_queue_reqs" not in query  # queue_depth: null leaves that condition out
    assert "'aws.sagemaker.inference_component.name'=" in query
    assert "vllm" not in query


def test_no_engine_alarm_where_sagemaker_collects_no_engine_metrics(app):
    assert _promql_alarms(app, LMI) == []


def test_every_promql_query_names_only_engine_series_and_endpoint_labels(app):
    """The class check for PromQL alarms (test_alarms.py checks the metric alarms): every metric name in every
    PromQL alarm of these stacks is one of the engines' series (either spelling), and every selector names the
    endpoint."""
    known = {s for series in ENGINE_SERIES.values() for n in vars(series).values() for s in spellings(n)}
    checked = 0
    for stack in (VLLM, SGLANG, LMI):
        for alarm in _promql_alarms(app, stack):
            query = alarm["EvaluationCriteria"]["PromQLCriteria"]["Query"]
            for name, labels in re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}", query):
                assert name in known, (stack, name)
                assert "'aws.sagemaker.endpoint.name'=" in labels, (stack, name)
                checked += 1
    assert checked >= 6


def test_the_dashboard_shows_the_engine_panel_of_vllm_and_sglang_only(app):
    [dashboard] = app.resources(ARTIFACTS, "AWS::CloudWatch::Dashboard")
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else "x" for p in parts))
    texts = [w["properties"]["markdown"] for w in body["widgets"] if w["type"] == "text"]
    panels = [t for t in texts if t.startswith("**Engine (")]
    assert len(panels) == 2
    vllm_panel = next(t for t in panels if "dev-em-vllm" in t)
    for what in ("Token throughput", "Time to first token p90", "KV-cache use", "Queue depth"):
        assert what in vllm_panel
    queries = engine_queries("vllm", "dev-em-vllm", None)
    assert queries.token_throughput in vllm_panel and queries.ttft_p90 in vllm_panel
    assert "vllm:time_to_first_token_seconds_bucket" in vllm_panel
    assert not any("em-lmi" in t for t in panels)
    statuses = [w for w in body["widgets"] if w["type"] == "alarm"]
    assert len(statuses) == 2
    assert all(w["properties"]["title"] == "Engine saturation" for w in statuses)


def test_cfn_lint_passes_the_templates(app, tmp_path):
    """cfn-lint 1.58 on the written templates (W3005 is CDK's own DependsOn style)."""
    paths = []
    for stack in (VLLM, SGLANG, LMI, ARTIFACTS):
        path = tmp_path / f"{stack}.json"
        path.write_text(json.dumps(app.templates[stack]))
        paths.append(str(path))
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run(
        [str(cfn_lint), "--format", "json", "--ignore-checks", "W3005", "--", *paths],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    findings = json.loads(result.stdout or "[]")
    assert findings == [], [(f["Filename"], f["Rule"]["Id"], f["Message"]) for f in findings]
    assert result.returncode == 0, result.stderr[-2000:]


# ------------------------------------------------------------------------------------------------ the config block


def test_the_default_block_and_scaling_on_concurrency_parse():
    spec = EngineMetrics()
    assert (spec.detailed_observability, spec.publish_frequency_s, spec.scaling_metric) == (True, 60, "concurrency")
    assert EngineMetrics.model_validate({"scaling_metric": "concurrency"}).scaling_metric == "concurrency"


@pytest.mark.parametrize("metric", ["queue-depth", "kv-cache"])
def test_scaling_on_an_engine_metric_is_refused_with_the_reason(metric):
    with pytest.raises(ValidationError) as error:
        EngineMetrics.model_validate({"scaling_metric": metric})
    message = str(error.value)
    assert f"scaling_metric {metric!r} cannot be built" in message
    assert ENGINE_SCALING_REFUSAL in message


@pytest.mark.parametrize(
    "block, fragment",
    [
        ({"scaling_metric": "tokens"}, "scaling_metric"),
        ({"publish_frequency_s": 45}, "publish_frequency_s"),
        ({"alarm": {"queue_depth": None, "kv_cache_percent": None}}, "set alarm: null"),
        ({"alarm": {"kv_cache_percent": 120}}, "kv_cache_percent"),
        ({"alarm": {"evaluation_interval_s": 90}}, "10, 20, 30 or a multiple of 60"),
        ({"alarm": {"pending_s": 90000}}, "pending_s"),
        ({"detailed_obs": True}, "detailed_obs"),
    ],
)
def test_bad_blocks_are_refused_naming_the_field(block, fragment):
    with pytest.raises(ValidationError) as error:
        EngineMetrics.model_validate(block)
    assert fragment in str(error.value)


def test_no_alarm_without_detailed_observability():
    assert EngineMetrics(detailed_observability=False).engine_alarm is None
    assert EngineMetrics().engine_alarm is not None


def test_the_refusal_reaches_the_user_through_load_config(tmp_path):
    """As users see it: ConfigError naming the endpoint's field, the value and the reason; no plan made."""
    from deployment import load_config
    from endpoint_config import ConfigError

    path = tmp_path / "scaling.yaml"
    path.write_text(CONFIG.replace("      publish_frequency_s: 30\n", "      scaling_metric: queue-depth\n"))
    with pytest.raises(ConfigError) as error:
        load_config(path, "dev")
    message = str(error.value)
    assert "engine_metrics" in message and "'queue-depth' cannot be built" in message
    assert "Application Auto Scaling" in message and "PromQL" in message


@pytest.mark.parametrize("system", sorted(ENGINE_SERIES))
def test_every_query_parses_as_promql(system):
    """Prometheus' grammar (promql-parser 0.11.0, requirements-dev.txt), quoted dotted labels included: a query
    CloudWatch cannot parse would fail the alarm at deploy or show nothing on the dashboard."""
    promql_parser = pytest.importorskip("promql_parser", reason="promql-parser (requirements-dev.txt) not installed")
    from endpoint_config.engine_metrics import EngineAlarm

    for component in (None, "ic-1"):
        queries = engine_queries(system, "dev-x", component)
        for query in (
            *vars(queries).values(),
            queries.alarm(EngineAlarm()),
            queries.alarm(EngineAlarm(queue_depth=None)),
        ):
            promql_parser.parse(query)
    with pytest.raises(Exception):  # the parser does refuse: an unbalanced query
        promql_parser.parse(queries.queue_depth + ")")


def test_the_vllm_names_are_vllm_0_30_0s_own():
    """The names stacks/engine_metrics.py reads for vllm are registered by the pinned engine itself (its
    PrometheusStatLogger in .venv-vllm, `make vllm-env`): an upgrade that renames one fails here. Counters are
    exposed with prometheus_client's `_total` suffix."""
    from local_runtime.vllm_container import ROOT

    found = sorted((ROOT / ".venv-vllm").glob("lib/python*/site-packages/vllm/v1/metrics/loggers.py"))
    if not found:
        pytest.skip(f"{ROOT / '.venv-vllm'} is missing: run `make vllm-env`")
    registered = set(re.findall(r'name="(vllm:[a-z_]+)"', found[0].read_text()))
    series = ENGINE_SERIES["vllm"]
    for name in (series.queue, series.kv_cache, series.ttft_histogram):
        assert name in registered, name
    for name in (series.prompt_tokens, series.generation_tokens):
        assert name.removesuffix("_total") in registered, name
    assert "vllm:gpu_cache_usage_perc" not in registered  # the SageMaker reference's name, gone from 0.30.0
