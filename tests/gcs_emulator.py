"""A local Google Cloud Storage for tests: gcp-storage-emulator (in memory, in a subprocess) with each
library this project writes gs:// through pointed at it.

  google-cloud-storage (Beam's GCS IO; orbax's bucket lookup)   STORAGE_EMULATOR_HOST
  TensorStore (orbax's arrays)                                  TENSORSTORE_GCS_HTTP_URL
  TensorFlow's gs:// filesystem (tf.io.gfile: storage.py,       no endpoint setting: its URLs are fixed
    etils' epath under orbax, tf.data, tf.train.Checkpoint)     (https://www.googleapis.com/...). It goes
                                                                through libcurl, which honours
                                                                HTTPS_PROXY and CURL_CA_BUNDLE: a proxy
                                                                here answers CONNECT with TLS under a
                                                                certificate made for googleapis.com and
                                                                relays the requests to the emulator.
Credentials: GOOGLE_AUTH_TOKEN_FOR_TESTING (TensorFlow, TensorStore); google-cloud-storage goes
anonymous when it talks to an emulator.

`python tests/gcs_emulator.py PORT BUCKET` runs the emulator with five fixes to what it does with
requests (real GCS does each right):
  - a body sent with Transfer-Encoding: chunked and a Content-Length is read as chunked (RFC 9112 6.3;
    the emulator read Content-Length bytes of the chunked framing: objects began "5\\r\\nhello");
  - an empty upload (a directory marker, an empty file) is stored empty (the emulator failed on it);
  - the URLs it hands back (a resumable upload's Location) name itself, not the Host header
    (www.googleapis.com: TensorFlow would then PUT to that host over plain HTTP, past the proxy).
  - a download carries the object's generation (x-goog-generation), as GCS's does: TensorStore takes
    a missing one for generation 0 and then refuses its next conditional write of that object
    ("Malformed StorageGeneration": OCDBT's manifest, when it had to read it back).
  - a write or delete honours its preconditions (ifGenerationMatch, 0 for "only if absent", and
    ifGenerationNotMatch; the XML API's x-goog-if-generation-match): a failed one answers 412 and
    changes nothing. The emulator ignored them, so a conditional write (TensorStore's, OCDBT's
    manifest) could never lose and a second writer of one object always succeeded. Each write is
    checked and applied under one lock, so two racing conditional writes cannot both pass.
"""

from __future__ import annotations

import contextlib
import datetime
import http
import http.server
import os
import select
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator

GOOGLE_HOSTS = ("www.googleapis.com", "storage.googleapis.com", "oauth2.googleapis.com")


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _make_certificate(directory: str) -> tuple[str, str]:
  """A self-signed certificate (and its key) for GOOGLE_HOSTS, valid for two days."""
  from cryptography import x509  # apache-beam's dependency
  from cryptography.hazmat.primitives import hashes, serialization
  from cryptography.hazmat.primitives.asymmetric import ec
  from cryptography.x509.oid import NameOID

  key = ec.generate_private_key(ec.SECP256R1())
  name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, GOOGLE_HOSTS[0])])
  now = datetime.datetime.now(datetime.timezone.utc)
  certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                 .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                 .not_valid_after(now + datetime.timedelta(days=2))
                 .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in GOOGLE_HOSTS]), critical=False)
                 .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                 .sign(key, hashes.SHA256()))
  certificate_path, key_path = os.path.join(directory, "googleapis.pem"), os.path.join(directory, "googleapis.key")
  with open(certificate_path, "wb") as f:
    f.write(certificate.public_bytes(serialization.Encoding.PEM))
  with open(key_path, "wb") as f:
    f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))
  return certificate_path, key_path


class TlsProxy:
  """An HTTPS proxy: each CONNECT is answered with TLS under `certificate`, and what the client sends
  inside is relayed, decrypted, to the plain-HTTP server at 127.0.0.1:`target_port`. It runs in the
  emulator's process: in the test's own, its threads would wait for the GIL while TensorFlow holds it
  in a write that waits for the proxy (a deadlock). Prints a line per tunnel and per error (a connection
  its client resets, as a killed process does, before or after the TLS handshake, is a "proxy tunnel
  reset", not an error)."""

  def __init__(self, certificate: str, key: str, target_port: int, port: int = 0):
    self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    self._context.load_cert_chain(certificate, key)
    self._target = ("127.0.0.1", target_port)
    self._socket = socket.socket()
    self._socket.bind(("127.0.0.1", port))
    self._socket.listen(128)
    self.port = self._socket.getsockname()[1]
    threading.Thread(target=self._serve, daemon=True, name="gcs-tls-proxy").start()

  def close(self) -> None:
    self._socket.close()

  def _serve(self) -> None:
    while True:
      try:
        connection, _ = self._socket.accept()
      except OSError:
        return
      threading.Thread(target=self._tunnel, args=(connection,), daemon=True).start()

  def _tunnel(self, connection: socket.socket) -> None:
    client = upstream = None
    side = "client"  # whose socket the operation under way is on: a reset there is the client's doing
    try:
      head = b""
      while b"\r\n\r\n" not in head:
        chunk = connection.recv(4096)
        if not chunk:
          return
        head += chunk
      host = head.split(b" ", 2)[1].decode() if head.startswith(b"CONNECT ") else ""
      if host.rsplit(":", 1)[0] not in GOOGLE_HOSTS:
        print(f"proxy error: refused {head.splitlines()[0]!r}", flush=True)
        connection.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
        return
      connection.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
      client = self._context.wrap_socket(connection, server_side=True)
      side = "upstream"
      upstream = socket.create_connection(self._target)
      print(f"proxy tunnel to {host}", flush=True)
      while True:
        ready = [client] if client.pending() else select.select([client, upstream], [], [], 120)[0]
        if not ready:
          return
        for source in ready:
          side = "client" if source is client else "upstream"
          data = source.recv(65536)
          if not data:
            return
          side = "upstream" if source is client else "client"
          (upstream if source is client else client).sendall(data)
    except (ConnectionResetError, BrokenPipeError, ssl.SSLEOFError) as error:
      # A client killed mid-request (the tests kill -9 train.py), at any point from its CONNECT on, ends
      # its side: not the proxy's fault. A reset on the emulator's side is.
      kind = "proxy tunnel reset" if side == "client" else "proxy error"
      print(f"{kind}: {type(error).__name__}: {error}", flush=True)
    except (OSError, ssl.SSLError) as error:
      print(f"proxy error: {type(error).__name__}: {error}", flush=True)
    finally:
      for s in (client, upstream, connection):
        if s is not None:
          with contextlib.suppress(OSError):
            s.close()


class Emulator:
  """The running emulator and proxy (one subprocess), and what they have logged."""

  def __init__(self, port: int, proxy_port: int, log: str, env: dict):
    self.port, self.proxy_port, self.log, self.env = port, proxy_port, log, env

  def lines(self, prefix: str) -> list[str]:
    with open(self.log) as f:
      return [line.rstrip("\n") for line in f if line.startswith(prefix)]


@contextlib.contextmanager
def gcs(bucket: str, directory: str) -> Iterator[Emulator]:
  """The emulator with `bucket` made, and the environment that points every library at it (set in
  os.environ for the duration, so subprocesses inherit it)."""
  port, proxy_port = free_port(), free_port()
  certificate, key = _make_certificate(directory)
  log_path = os.path.join(directory, "gcs-emulator.log")
  log = open(log_path, "w")
  process = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(port), str(proxy_port), bucket, certificate,
                              key], stdout=log, stderr=subprocess.STDOUT)
  saved = dict(os.environ)
  try:
    deadline = time.monotonic() + 30
    while True:
      try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read()
        socket.create_connection(("127.0.0.1", proxy_port), timeout=2).close()
        break
      except OSError:
        if process.poll() is not None or time.monotonic() > deadline:
          raise RuntimeError(f"gcp-storage-emulator did not start: {open(log_path).read()[-2000:]}") from None
        time.sleep(0.1)
    emulator = f"http://127.0.0.1:{port}"
    env = {
        "STORAGE_EMULATOR_HOST": emulator, "GOOGLE_CLOUD_PROJECT": "codelm-test",
        "TENSORSTORE_GCS_HTTP_URL": emulator,
        "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator",
        "HTTPS_PROXY": f"http://127.0.0.1:{proxy_port}", "https_proxy": f"http://127.0.0.1:{proxy_port}",
        "CURL_CA_BUNDLE": certificate,
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    }
    os.environ.update(env)
    yield Emulator(port, proxy_port, log_path, env)
  finally:
    os.environ.clear()
    os.environ.update(saved)
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
      process.wait(10)
    if process.poll() is None:
      process.kill()
      process.wait()
    log.close()


def _serve(port: int, proxy_port: int, bucket: str, certificate: str, key: str) -> None:
  from gcp_storage_emulator import server

  read_raw = server._read_raw_data

  def read_raw_chunked_first(handler):
    if (handler.headers.get("Transfer-Encoding") or "").lower() == "chunked":
      del handler.headers["Content-Length"]
    return read_raw(handler)

  read = server._read_data

  def read_empty_upload(handler, query):
    data = read(handler, query)
    return b"" if data is None and handler.command in ("POST", "PUT") and "uploadType" in query else data

  from gcp_storage_emulator.handlers import objects

  download = objects.download

  def download_with_generation(request, response, storage, *args, **kwargs):
    try:  # before the content: a write in between gives a newer object, never an older generation
      stored = storage.get_file_obj(request.params["bucket_name"], request.params["object_id"])
    except Exception:  # noqa: BLE001 - not there: download answers 404 itself
      stored = {}
    download(request, response, storage, *args, **kwargs)
    if stored.get("generation") and response.status in (200, 206):
      response["x-goog-generation"] = str(stored["generation"])
      response["x-goog-metageneration"] = str(stored.get("metageneration", 1))

  from gcp_storage_emulator.exceptions import NotFound

  write_lock = threading.Lock()

  def target(handler, request, storage) -> tuple[str, str] | None:
    """The (bucket, object) a write handler would create or delete."""
    params, kind = request.params or {}, handler.__name__
    if kind in ("copy", "rewrite"):
      return params["dest_bucket_name"], params["dest_object_id"]
    if kind == "upload_partial":
      pending = storage.get_resumable_file_obj(request.query["upload_id"][0])
      return pending["bucket"], pending["name"]
    if kind == "insert":
      if "name" in request.query:
        return params["bucket_name"], request.query["name"][0]
      body = request.data if isinstance(request.data, dict) else {}
      name = (body.get("meta") or {}).get("name") if "meta" in body else body.get("name")
      return (params["bucket_name"], name) if name else None
    return params["bucket_name"], params["object_id"]  # xml_upload, compose, delete

  def conditions(request) -> dict[str, int]:
    found = {}
    for query, header in (("ifGenerationMatch", "x-goog-if-generation-match"),
                          ("ifGenerationNotMatch", None)):
      value = (request.query.get(query) or [None])[0] or (header and request.get_header(header))
      if value is not None:
        found[query] = int(value)
    return found

  def conditional(handler):
    def write(request, response, storage, *args, **kwargs):
      request.data  # the body is read outside the lock: only the check and the write are serialised
      with write_lock:
        required = conditions(request)
        if required:
          try:
            where = target(handler, request, storage)
          except (KeyError, NotFound):
            where = None
          if where is not None:
            try:
              generation = int(storage.get_file_obj(*where).get("generation") or 0)
            except NotFound:
              generation = 0  # GCS: an absent object has generation 0
            held = all((generation == value) if name == "ifGenerationMatch" else (generation != value)
                       for name, value in required.items())
            if not held:
              response.status = http.HTTPStatus.PRECONDITION_FAILED
              response.json({"error": {"code": 412, "message": "At least one of the pre-conditions you "
                                       "specified did not hold.", "errors": [{"reason": "conditionNotMet"}]}})
              return None
        return handler(request, response, storage, *args, **kwargs)
    return write

  writers = (objects.insert, objects.upload_partial, objects.xml_upload, objects.delete, objects.compose,
             objects.copy, objects.rewrite)

  init = server.Request.__init__

  def init_with_own_address(self, handler, method):
    init(self, handler, method)
    self._base_url = f"http://127.0.0.1:{port}"
    self._full_url = self._base_url + self._path

  # Faster, as GCS is: a thread per connection (orbax writes many files at once), kept alive.
  server.server.HTTPServer = http.server.ThreadingHTTPServer
  server.RequestHandler.protocol_version = "HTTP/1.1"
  server._read_raw_data = read_raw_chunked_first
  server._read_data = read_empty_upload
  server.Request.__init__ = init_with_own_address
  objects.download = download_with_generation  # objects.get's alt=media calls it by this name
  for _, handlers in server.HANDLERS:
    for method, handler in list(handlers.items()):
      if handler is download:
        handlers[method] = download_with_generation
      elif handler in writers:
        handlers[method] = conditional(handler)
  objects.insert = conditional(objects.insert)  # the router's fallback for an upload POSTed without /upload
  emulator = server.create_server("127.0.0.1", port, in_memory=True, default_bucket=bucket)
  TlsProxy(certificate, key, port, proxy_port)
  emulator.run()


if __name__ == "__main__":
  _serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
