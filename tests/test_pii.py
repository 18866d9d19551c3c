import hashlib
import pathlib
import re

import pytest
from detect_secrets.filters import heuristic

from data import pii
from data.pii import EMAIL, KEY, PII_KINDS, SYNTHETIC_IPS, redact

AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
GITHUB_TOKEN = "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"
TOKEN = "Xy9bQ2LmN4vR8tK1pZ7wJ3sD6fH0gA5c"  # base64 charset, entropy > 4.5
HEX_TOKEN = hashlib.sha256(b"codelm").hexdigest()  # entropy > 3
PRIVATE_KEY = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA75ZdVJ1Kd2ZqUe0h\nq3Wz8Xf1bT0nRk2Lm9Yc4Hs7Gd==\n"
               "-----END RSA PRIVATE KEY-----")
FILLER = "x = 1\n" * 100  # enough lines that one "sha" does not make a file "full of hashes"


def test_kinds():
  assert PII_KINDS == ("email", "ip_address", "key")


@pytest.mark.parametrize("text, expected", [
    ("Contact jane.doe@example.com.", f"Contact {EMAIL}."),
    ("jane@example.co.uk wrote", f"{EMAIL} wrote"),
    ("Author: Jane <jane@mail.example.org>", f"Author: Jane <{EMAIL}>"),
    ("(bob_99+tag@sub.example.io)", f"({EMAIL})"),
    ("# 邮箱: li@example.cn; 谢谢", f"# 邮箱: {EMAIL}; 谢谢"),
])
def test_emails_are_replaced_and_counted(text, expected):
  assert redact(text) == (expected, {"email": 1})


def test_emails_are_counted_per_occurrence():
  assert redact("a@example.com, b@example.com\na@example.com") == (f"{EMAIL}, {EMAIL}\n{EMAIL}", {"email": 3})


@pytest.mark.parametrize("text", [
    "@property\ndef name(self):\n  return self._name\n",
    "@Override\npublic String toString() { return name; }\n",
    "ssh user@localhost",
    "x = a @ b.T",
    "mail to: @example.com",
    "version@1",
])
def test_at_signs_that_are_not_emails_stay(text):
  assert redact(text) == (text, {})


def test_public_ip_addresses_become_synthetic_ones_of_their_version():
  text, counts = redact("host = '93.184.216.34'\nupstream 2001:4860:4860::8844;\n")
  four, six = re.fullmatch(r"host = '(.*)'\nupstream (.*);\n", text).groups()
  assert four in SYNTHETIC_IPS[4] and six in SYNTHETIC_IPS[6] and counts == {"ip_address": 2}
  # One address, one stand-in, on every run.
  again, counts = redact("a 93.184.216.34 b 93.184.216.34")
  assert again == f"a {four} b {four}" and counts == {"ip_address": 2}


@pytest.mark.parametrize("text", [
    "bind('127.0.0.1', 8080)", "10.0.0.1", "gateway 192.168.1.1", "172.16.0.5", "[::1]:80 and ::1", "fe80::1%eth0",
    "documentation 192.0.2.44 and 2001:db8::7",  # documentation ranges count as private
    "resolvers 208.67.222.222, 149.112.112.112",  # popular DNS servers
    "requires libfoo 1.2.3.4 or later",  # x.x.x.x of single digits: a version
    "released 12.10.99.5",  # date-shaped: dd.mm.yy
    "033.01.33.33",  # not an address (leading zeros)
    "no digits: fe::ab and a::b",
    "std::vector<int> v; Data.Map.insert k v",
    "(93.184.216.34)",  # BigCode's regex wants no ")" after an address
])
def test_addresses_that_are_not_pii_stay(text):
  assert redact(text) == (text, {})


@pytest.mark.parametrize("text", ["the DNS is at 5.6.7.8", "Server: 5.6.7.8"])
def test_a_version_shaped_address_near_dns_or_server_is_an_address(text):
  redacted, counts = redact(text)
  assert redacted.rsplit(" ", 1)[1] in SYNTHETIC_IPS[4] and counts == {"ip_address": 1}
  far = "upstream 5.6.7.8" + " " * 101 + "server"
  assert redact(far) == (far, {})


@pytest.mark.parametrize("secret, line", [
    (AWS_KEY_ID, f"aws_access_key_id = {AWS_KEY_ID}\n"),
    (GITHUB_TOKEN, f'token = "{GITHUB_TOKEN}"\n'),  # the whole token, not only detect-secrets' "ghp" group
    (TOKEN, f'client = Client(api_secret="{TOKEN}")\n'),
    (HEX_TOKEN, f"const salt = '{HEX_TOKEN}';\r\n"),
    ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", 'stripe.api_key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"\n'),
    ("xoxb-123456789012-abcdefghijkl", "SLACK = 'xoxb-123456789012-abcdefghijkl'\n"),
    ("a1" * 32, f'softlayer_api_key = "{"a1" * 32}"\n'),
    ("ab" * 12, f'cloudant_password = "{"ab" * 12}"\n'),
])
def test_keys_are_replaced_and_counted(secret, line):
  text, counts = redact(FILLER + line)
  assert secret not in text and KEY in text and counts == {"key": 1}


def test_the_shortest_high_entropy_strings_are_found():
  # Entropy above 4.5 (base64) or 3.0 (hex) takes more than 2 ** limit distinct characters: 23 and 9.
  for least in ("q7Wz2Kp9Lm4Xc8Vb3Nh6Jd1", "a3f9c1e7b"):
    assert redact(FILLER + f'x = "{least}"\n')[1] == {"key": 1}
    assert redact(FILLER + f'x = "{least[:-1]}"\n')[1] == {}


def test_a_private_key_block_is_one_key():
  text = f'key = """{PRIVATE_KEY}"""\nprint(key)\n'
  assert redact(text) == (f'key = """{KEY}"""\nprint(key)\n', {"key": 1})
  armour = f"{PRIVATE_KEY[:31]}\n{AWS_KEY_ID}\n{PRIVATE_KEY[32:]}"  # a key found inside the block: still one
  assert redact(armour) == (KEY, {"key": 1})
  assert redact("-----BEGIN PGP PRIVATE KEY BLOCK-----\nabc\n-----END PGP PRIVATE KEY BLOCK-----") == (KEY, {"key": 1})
  assert redact("-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----")[1] == {}


def test_every_occurrence_of_a_found_key_goes():
  text = f'A = "{TOKEN}"\nB = A or {TOKEN}\n'
  assert redact(text) == (f'A = "{KEY}"\nB = A or {KEY}\n', {"key": 2})


@pytest.mark.parametrize("text", [
    'request_id = "123e4567-e89b-12d3-a456-426614174000"\n',  # a UUID
    'alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"\n',  # sequential
    f'user_id = "{TOKEN}"\n',  # an id
    'url = "${SECRET_TOKEN_FROM_THE_ENVIRONMENT_Xy9bQ2Lm}"\n',  # templated
    f"token = {TOKEN}\n",  # not quoted: the entropy plugins need quotes
    'name = "a_plain_python_identifier_name"\n',
    f'checksum_sha256 = "{HEX_TOKEN}"\n',  # a 64-character value after "sha": a hash
])
def test_values_that_are_not_keys_stay(text):
  assert redact(FILLER + text) == (FILLER + text, {})


@pytest.mark.parametrize("word", ["hash", "SHA"])
def test_a_file_full_of_hashes_keeps_its_keys_but_not_its_private_keys(word):
  text = f'# {word} helpers\nx = "{TOKEN}"\n'  # once in 2 lines: more than int(0.02 * 2) = 0
  assert redact(text) == (text, {})
  assert redact(text + PRIVATE_KEY) == (text + KEY, {"key": 1})
  assert redact(FILLER + text)[1] == {"key": 1}  # once in 102 lines is not "full"


def test_all_kinds_together_and_a_second_pass_finds_nothing():
  text = (f"# maintainer: dev@example.org, build host 93.184.216.34\n"
          f'API = "{TOKEN}"\n{FILLER}')
  redacted, counts = redact(text)
  assert counts == {"email": 1, "ip_address": 1, "key": 1}
  assert EMAIL in redacted and KEY in redacted and "93.184.216.34" not in redacted
  assert redact(redacted) == (redacted, {})  # the stand-ins are not PII


def test_ordinary_code_is_unchanged():
  for path in ("languages.py", "data/unimax.py", "data/quality.py"):
    source = pathlib.Path(path).read_text()
    assert redact(source) == (source, {}), path


def _reference_secrets(text):
  """BigCode's scan: every plugin on every line, then the 4 filters (GitHub tokens whole, as pii does)."""
  found = set()
  for line in re.split(r"\r\n?|\n", text):
    line = line.rstrip()
    for plugin in pii._PLUGINS:
      whole = pii._WHOLE_MATCHES.get(type(plugin).__name__)
      values = whole.findall(line) if whole else [s.secret_value for s in plugin.analyze_line(filename="x", line=line)]
      found.update(v for v in values if whole or not (
          heuristic.is_potential_uuid(v) or heuristic.is_likely_id_string(v, line, plugin)
          or heuristic.is_templated_secret(v) or heuristic.is_sequential_string(v)))
  return found


@pytest.mark.parametrize("extra", [
    "",  # the word finders run on the lowercased text
    'ibm_cloud_pa\u017f\u017fword = "' + "wxyz9876" * 5 + 'wxyz"',  # ſ matches s under IGNORECASE, not in lower()
    "\u0130",  # İ: lower() lengthens the text, so no word finders
])
def test_scanning_only_the_lines_the_finders_pick_loses_nothing(extra):
  lines = [f"aws_access_key_id = {AWS_KEY_ID}", f'token = "{GITHUB_TOKEN}"', f'x = "{TOKEN}"', f"h = '{HEX_TOKEN}'",
           'aws_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYab"', "apikey: AKCp5bueTFpfypEqQbGJPp7BHWUrzEXAMPLE",
           'ibm_cloud_iam_api_key = "abcd1234abcd1234abcd1234abcd1234abcd1234abcd"', "0123456789abcdef" * 2 + "-us12",
           'cos_secret_access_key = "' + "abcd0123" * 6 + '"', "AccountKey=" + "A" * 86 + "==",
           'jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcDEF123"', "//registry.npmjs.org/:_authToken=npm_" + "a" * 36,
           "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", f"PASSWORD = '{TOKEN[::-1]}'  ",
           "url = 'https://hooks.slack.com/services/T000/B000/XXXX'", "x" * 30, "",
           'ibm_iam_pwd = "' + "efgh5678" * 5 + 'efgh"', 'CL_PW = "' + "gh" * 12 + '"', "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"[::-1],
           'sl_pwd = "' + "b2" * 32 + '"', extra]
  text = "\r\n".join(lines) + "\n" + pathlib.Path("data/quality.py").read_text()
  expected = _reference_secrets(text)
  assert len(expected) >= 17 + bool(extra.strip('\u0130')) and pii._secret_values(text) == expected
