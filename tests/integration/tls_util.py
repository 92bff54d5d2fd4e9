"""Throw-away TLS files for the tests of tls-port (test_tls.py), made with the openssl command.

make_tls_files(dir) writes, with EC P-256 keys valid 2 days:
  ca.crt/ca.key          the test CA
  server.crt/server.key  signed by it, for 127.0.0.1 and localhost (CN "stratakv-server")
  server2.crt/.key       another server certificate of the same CA (CN "stratakv-server-2")
  server-enc.key         server.key encrypted with the passphrase PASSPHRASE
  client.crt/client.key  a client certificate the CA signed
  rogue.crt/rogue.key    a client certificate of another CA, which the server must refuse
and returns a TlsFiles naming them. None when there is no openssl.
"""

import shutil
import subprocess
from pathlib import Path

PASSPHRASE = "s3cret-pass"

_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


class TlsFiles:
    def __init__(self, d):
        d = Path(d)
        self.dir = d
        self.ca = str(d / "ca.crt")
        self.server_crt, self.server_key = str(d / "server.crt"), str(d / "server.key")
        self.server2_crt, self.server2_key = str(d / "server2.crt"), str(d / "server2.key")
        self.server_key_enc = str(d / "server-enc.key")
        self.client_crt, self.client_key = str(d / "client.crt"), str(d / "client.key")
        self.rogue_crt, self.rogue_key = str(d / "rogue.crt"), str(d / "rogue.key")

    def server_config(self, **extra):
        """Keyword arguments of launch_server for TLS with these files."""
        cfg = dict(tls_cert_file=self.server_crt, tls_key_file=self.server_key,
                   tls_ca_cert_file=self.ca)
        cfg.update(extra)
        return cfg


def _run(d, *args):
    subprocess.run(["openssl", *args], cwd=str(d), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def _signed(d, name, ca, cn, ext):
    _run(d, "req", *_KEY, "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn)
    _run(d, "x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
         "-CAcreateserial", "-out", name + ".crt", "-days", "2", "-extfile", ext)


def make_tls_files(d):
    if shutil.which("openssl") is None:
        return None
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    (d / "server.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                  "extendedKeyUsage=serverAuth\n")
    (d / "client.cnf").write_text("extendedKeyUsage=clientAuth\n")
    for ca, cn in (("ca", "stratakv-test-ca"), ("rogue-ca", "stratakv-rogue-ca")):
        _run(d, "req", "-x509", *_KEY, "-keyout", ca + ".key", "-out", ca + ".crt", "-days", "2",
             "-subj", "/CN=" + cn)
    _signed(d, "server", "ca", "stratakv-server", "server.cnf")
    _signed(d, "server2", "ca", "stratakv-server-2", "server.cnf")
    _signed(d, "client", "ca", "stratakv-client", "client.cnf")
    _signed(d, "rogue", "rogue-ca", "stratakv-rogue", "client.cnf")
    _run(d, "pkey", "-in", "server.key", "-out", "server-enc.key", "-aes256",
         "-passout", "pass:" + PASSPHRASE)
    return TlsFiles(d)
