"""Provider token formats the redactor recognises (tf_fsm/storage/redact.py), format by format.

Every fake token is built here from a prefix and seeded random characters of the format's
alphabet, so no complete credential sits in the source for scanners to flag. Each one must be
redacted in plain text, in JSON and in JSON inside JSON; each near miss (the prefix in ordinary
prose or code) must be left alone. The end-to-end test runs `tf-fsm run` with an agent that
prints tokens and writes them into its artifact, then reads every file tf_fsm wrote.
"""

from __future__ import annotations

import json
import random
import string
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tf_fsm.storage.redact import MARKER, redact

if TYPE_CHECKING:
    from tests.e2e.conftest import Harness

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
HEX = "0123456789abcdef"
LOWER_ALNUM = string.ascii_lowercase + string.digits
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


def chars(alphabet: str, n: int, seed: str) -> str:
    """`n` characters of `alphabet`, the same on every run, with a digit in them when the
    alphabet has digits (a real random token of that length almost always has one)."""
    rng = random.Random(seed)  # noqa: S311 - test data, not crypto
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        if not set(alphabet) & set(string.digits) or any(c.isdigit() for c in out):
            return out


FORMATS: dict[str, str] = {
    # GitLab (gitleaks: gitlab-*)
    "gitlab-pat": "glpat-" + chars(URLSAFE, 20, "glpat"),
    "gitlab-pat-routable": f"glpat-{chars(URLSAFE, 40, 'pat')}.{chars(LOWER_ALNUM, 9, 'r')}",
    "gitlab-deploy": "gldt-" + chars(URLSAFE, 20, "gldt"),
    "gitlab-runner": "glrt-" + chars(URLSAFE, 20, "glrt"),
    "gitlab-runner-routable": "glrt-t1_" + chars(ALNUM, 30, "glrt2") + ".01" + chars(HEX, 7, "c"),
    "gitlab-runner-registration": "GR1348941" + chars(URLSAFE, 20, "GR"),
    "gitlab-pipeline-trigger": "glptt-" + chars(HEX, 40, "glptt"),
    "gitlab-scim": "glsoat-" + chars(URLSAFE, 20, "glsoat"),
    "gitlab-ci-job": "glcbt-64_" + chars(URLSAFE, 20, "glcbt"),
    "gitlab-feed": "glft-" + chars(URLSAFE, 20, "glft"),
    "gitlab-feature-flag": "glffct-" + chars(URLSAFE, 20, "glffct"),
    "gitlab-incoming-mail": "glimt-" + chars(URLSAFE, 25, "glimt"),
    "gitlab-k8s-agent": "glagent-" + chars(URLSAFE, 50, "glagent"),
    "gitlab-oauth-secret": "gloas-" + chars(URLSAFE, 64, "gloas"),
    # Hugging Face: 34 letters of both cases
    "huggingface": "hf_" + chars(string.ascii_letters, 34, "hf"),
    "huggingface-org": "api_org_" + chars(string.ascii_letters, 34, "org"),
    # package registries
    "npm": "npm_" + chars(ALNUM, 36, "npm"),
    "pypi": "pypi-AgEIcHlwaS5vcmc" + chars(URLSAFE, 70, "pypi"),
    # Slack
    "slack-app": f"xapp-1-A0{chars(ALNUM, 9, 'xa').upper()}-1234567890123-{chars(HEX, 64, 'x')}",
    "slack-config-access": "xoxe.xoxp-1-" + chars(ALNUM, 163, "xoxe.xoxp"),
    "slack-config-refresh": "xoxe-1-" + chars(ALNUM, 146, "xoxe"),
    "slack-webhook": "hooks.slack.com/services/"
    + "/".join(chars(ALNUM, n, seed) for n, seed in ((9, "T"), (9, "B"), (24, "hook"))),
    # Stripe
    "stripe-prod": "sk_prod_" + chars(ALNUM, 24, "skprod"),
    "stripe-restricted-prod": "rk_prod_" + chars(ALNUM, 24, "rkprod"),
    "stripe-webhook": "whsec_" + chars(ALNUM, 32, "whsec"),
    # Shopify
    **{f"shopify-{p}": f"shp{p}_" + chars(HEX, 32, p) for p in ("at", "ca", "pa", "ss")},
    # DigitalOcean
    **{f"digitalocean-{p}": f"do{p}_v1_" + chars(HEX, 64, p) for p in "opr"},
    # others with a stable prefix
    "sendgrid": "SG." + chars(URLSAFE, 22, "sg1") + "." + chars(URLSAFE, 43, "sg2"),
    "twilio-api-key": "SK" + chars(HEX, 32, "twilio"),
    "doppler-personal": "dp.pt." + chars(ALNUM, 43, "dppt"),
    "doppler-service": "dp.st.prd." + chars(ALNUM, 43, "dpst"),
    "linear": "lin_api_" + chars(ALNUM, 40, "linear"),
    "postman": "PMAK-" + chars(HEX, 24, "pm1") + "-" + chars(HEX, 34, "pm2"),
    "atlassian": "ATATT3" + chars(URLSAFE + "=", 186, "atlassian"),
    "databricks": "dapi" + chars(HEX, 32, "dapi"),
    "grafana-cloud": "glc_" + chars(ALNUM + "+/", 60, "glc") + "==",
    "grafana-service-account": "glsa_" + chars(ALNUM, 32, "glsa") + "_" + chars(HEX, 8, "g"),
    "grafana-api-key": "eyJrIjoi" + chars(ALNUM, 80, "grafana"),
    "new-relic-user": "NRAK-" + chars(string.ascii_uppercase + string.digits, 27, "nrak"),
    "new-relic-insert": "NRII-" + chars(LOWER_ALNUM + "-", 32, "nrii"),
    "sentry-user": "sntryu_" + chars(HEX, 64, "sntryu"),
    "sentry-org": f"sntrys_eyJpYXQiO{chars(ALNUM, 30, 's1')}LCJyZWdpb25fdXJs"
    f"{chars(ALNUM, 30, 's2')}_{chars(ALNUM + '+/', 43, 's3')}",
    "age": "AGE-SECRET-KEY-1" + chars(BECH32, 58, "age"),
    "aws-abia": "ABIA" + chars(string.ascii_uppercase + "234567", 16, "abia"),
    "vault-service": "hvs." + chars(URLSAFE, 95, "hvs"),
    # AI providers (OpenAI and Anthropic in gitleaks' shapes, the others after trufflehog)
    "anthropic": "sk-ant-api03-" + chars(URLSAFE, 93, "ant") + "AA",
    "anthropic-admin": "sk-ant-admin01-" + chars(URLSAFE, 93, "admin") + "AA",
    "openai-project": "sk-proj-" + chars(URLSAFE, 74, "p1") + "T3BlbkFJ" + chars(URLSAFE, 74, "p2"),
    "openai-legacy": "sk-" + chars(ALNUM, 20, "o1") + "T3BlbkFJ" + chars(ALNUM, 20, "o2"),
    "openrouter": "sk-or-v1-" + chars(HEX, 64, "openrouter"),
    "github-fine-grained": "github_pat_" + chars(ALNUM + "_", 82, "ghfg"),
    "groq": "gsk_" + chars(ALNUM, 52, "groq"),
    "xai": "xai-" + chars(ALNUM, 80, "xai"),
    "replicate": "r8_" + chars(ALNUM, 37, "replicate"),
    "perplexity": "pplx-" + chars(ALNUM, 48, "pplx"),
    "langsmith": "lsv2_pt_" + chars(HEX, 32, "ls1") + "_" + chars(HEX, 10, "ls2"),
}


# A Slack webhook URL keeps its host, so that the log still says where it pointed.
KEPT = {"slack-webhook": "hooks.slack.com/services/"}


def redacted(name: str) -> str:
    return KEPT.get(name, "") + MARKER


@pytest.mark.parametrize(("name", "token"), FORMATS.items(), ids=FORMATS.keys())
def test_token_is_redacted_in_plain_text(name: str, token: str) -> None:
    for template in ("key {} used", "{}", "x='{}'", "({})", "`{}`\n", "a\n{}.", 'K="{}";'):
        assert redact(template.format(token)) == template.format(redacted(name))


@pytest.mark.parametrize(("name", "token"), FORMATS.items(), ids=FORMATS.keys())
def test_token_is_redacted_in_json_and_json_in_json(name: str, token: str) -> None:
    text = f"line one\n{token}\nsaid: {token}\tend"
    once = json.dumps({"event": "x", "text": text})
    twice = json.dumps({"event": "y", "raw": once})
    for encoded in (once, twice, json.dumps({"raw": once}, ensure_ascii=False)):
        out = redact(encoded)
        assert token not in out
        assert json.loads(out)  # still valid JSON
    inner = json.loads(json.loads(redact(twice))["raw"])
    assert inner["text"] == f"line one\n{redacted(name)}\nsaid: {redacted(name)}\tend"


@pytest.mark.parametrize(
    "text",
    [
        "from huggingface_hub import hf_hub_download; hf_hub_download(repo_id=x)",
        "hf_" + "cachedmodeldownloadsfromthehubdirectory",  # one case only: a name, not a token
        "HF_" + "CACHEDMODELDOWNLOADSFROMTHEHUBDIRECTORY",
        "npm_config_cache=/tmp/npm and npm_package_version",
        "npm_" + "lifecycle" * 5 + "_event",  # a longer name goes on after the letters
        "the SG. abbreviation, SG.T5 and SG.something.else",
        "the glpat- prefix, a glpat-style token and glrt-t1_x",
        "glc_count = 3; glsa_total = 4",
        "api_org_name and api_org_ids",
        "SKIPPED tests, SKU 1234567890abcdef, SK" + "0123456789abcdef" * 3,  # hex runs on
        "dapi_client.call(); dapi" + "0123456789abcdef" * 2 + "ff",
        "set xapp- and xoxe.xoxp- in the Slack config",
        "the whsec_ prefix, dop_v1_ tokens, dp.pt. tokens, lin_api_key",
        "PMAK- keys, ATATT3 tokens, NRAK- keys, sntryu_ tokens, AGE-SECRET-KEY-1 lines",
        "the GR1348941 prefix marks runner registration tokens",
        "pypi-AgEIcHlwaS5vcmc is the start of every PyPI token",
        "hooks.slack.com/services/T000/B000/XXXX",
        "gsk_ keys, xai- keys, r8_ keys, pplx- keys, lsv2_pt_ keys",
        "shpat_ and shpss_ tokens; shpat_" + "abcdef" * 5,
        "hvs.example and the hvs. prefix",
    ],
)
def test_near_misses_are_left_alone(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("first", ["\n", "\r"])
def test_a_token_after_a_json_escape_letter_does_not_cut_the_escape(first: str) -> None:
    # "\n" + "pm_..." reads `\npm_...` once JSON-encoded: the `n` belongs to the escape.
    rest = {"\n": "pm_" + chars(ALNUM, 36, "pm"), "\r": "k_live_" + chars(ALNUM, 24, "k")}[first]
    for encoded in (json.dumps({"k": first + rest}), json.dumps({"k": f"a {first}{rest} b"})):
        assert isinstance(json.loads(redact(encoded)), dict)


# --- end to end --------------------------------------------------------------------------

LEAKED = [FORMATS["gitlab-pat"], FORMATS["huggingface"], FORMATS["npm"]]

# Runs the fake agent after printing the tokens (read from its plan, so that they are not in
# tf_fsm's environment, whose secret-looking values are redacted anyway) to stdout and stderr.
_LEAKY_AGENT = """\
import json, os, runpy, sys
tokens = json.load(open(os.environ["FAKE_AGENT_PLAN"]))["secret"]
print("agent output:", tokens, flush=True)
print(json.dumps({"type": "message", "text": "using " + tokens}), flush=True)
print("agent warning:", tokens, file=sys.stderr, flush=True)
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_run_writes_no_token_anywhere_under_tf(e2e: Harness, tmp_path: Path) -> None:
    from tests.e2e.conftest import AGENT, finding

    wrapper = e2e.agent_dir / "leaky_agent.py"
    wrapper.write_text(_LEAKY_AGENT, encoding="utf-8")
    settings_path = e2e.project / ".tf" / "config" / "settings.json"
    config = json.loads(settings_path.read_text(encoding="utf-8"))
    config["executor"]["command"] = [sys.executable, str(wrapper), str(AGENT)]
    settings_path.write_text(json.dumps(config), encoding="utf-8")
    tokens = " ".join(LEAKED)
    leak = finding("s1", "*", text=f"`config.py:3` - hard-coded tokens {tokens}")
    e2e.plan(secret=tokens, findings=[leak])

    result = e2e.run()

    assert result.returncode == 0, result.stderr
    assert e2e.agent_calls(phase="review")  # the agent ran, through the wrapper
    written = [p for p in (e2e.project / ".tf").rglob("*") if p.is_file()]
    leaks = [
        (str(p.relative_to(e2e.project)), token[:8])
        for p in [*written, e2e.ticket_file]
        for token in LEAKED
        if token in p.read_text(encoding="utf-8", errors="replace")
    ]
    assert not leaks, f"{len(leaks)} leaks: {leaks}"
    logs = [p for p in written if "logs" in p.parts]
    assert logs
    assert any("agent output: [REDACTED]" in p.read_text(errors="replace") for p in logs)
    assert "hard-coded tokens [REDACTED]" in (e2e.dir / "review-general.md").read_text()
