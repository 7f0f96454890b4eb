"""A fake Web Push service on loopback, for tests/external/push.rs.

It holds subscriptions whose keys it made itself (a P-256 key pair and a 16-byte auth secret
each, as a browser does), and for every push it receives it checks what a real push service
checks, with libraries nobody in imrelay wrote:

- the VAPID header (RFC 8292): `Authorization: vapid t=<JWT>, k=<public key>`; the JWT's
  signature is verified with `cryptography` against `k`, its `aud` must be exactly this
  service's origin, port included, `exp` in the future and at most 24 hours ahead, `sub` a
  `mailto:` or `https:` URI;
- the payload (RFC 8291): `Content-Encoding: aes128gcm`, decrypted with `http_ece` using the
  subscription's private key and auth secret;
- `TTL` present, `Urgency` (when sent) one of RFC 8030's values.

A push that fails any check is answered 400 or 401 and recorded with the reason. A push to a
subscription told to answer otherwise (`POST /control`, `{"sub": n, "statuses": [410]}`) gets
those statuses in turn. `GET /received` lists every push as JSON.

Started as `python fake_push.py N`, it prints one JSON line: its port and N subscriptions
(`endpoint`, `keys.p256dh`, `keys.auth`, and `private` for a test that wants to decrypt
itself), then serves until its standard input closes.
"""

import base64
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def b64e(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class Subscription:
    def __init__(self):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = __import__("os").urandom(16)
        self.statuses = []

    def public(self):
        return self.key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )


SUBS = []
RECEIVED = []
LOCK = threading.Lock()
ORIGIN = ""


def check_vapid(header):
    """The JWT's claims when the header is a valid VAPID header for this origin; else raises."""
    if not header.startswith("vapid "):
        raise ValueError("Authorization is not a vapid header: %r" % header[:40])
    params = {}
    for part in header[len("vapid "):].split(","):
        k, _, v = part.strip().partition("=")
        params[k] = v
    token, key = params.get("t"), params.get("k")
    if not token or not key:
        raise ValueError("vapid header without t= or k=")
    head_b64, claims_b64, sig_b64 = token.split(".")
    head = json.loads(b64d(head_b64))
    if head.get("alg") != "ES256":
        raise ValueError("JWT alg is %r, not ES256" % head.get("alg"))
    claims = json.loads(b64d(claims_b64))
    raw = b64d(key)
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    sig = b64d(sig_b64)
    if len(sig) != 64:
        raise ValueError("ES256 signature is %d bytes, not 64" % len(sig))
    der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
    try:
        public.verify(der, (head_b64 + "." + claims_b64).encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ValueError("JWT signature does not verify with k")
    if claims.get("aud") != ORIGIN:
        raise ValueError("JWT aud is %r, not this service's origin %r" % (claims.get("aud"), ORIGIN))
    now = time.time()
    exp = claims.get("exp", 0)
    if not (now < exp <= now + 24 * 3600 + 60):
        raise ValueError("JWT exp %r is not within the next 24 hours" % exp)
    sub = claims.get("sub", "")
    if not (sub.startswith("mailto:") or sub.startswith("https:")):
        raise ValueError("JWT sub %r is not a mailto: or https: URI" % sub)
    return claims, key


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n)

    def do_GET(self):
        if self.path == "/received":
            with LOCK:
                self.answer(200, json.dumps(RECEIVED).encode())
        else:
            self.answer(404)

    def do_POST(self):
        body = self.body()
        if self.path == "/control":
            c = json.loads(body)
            with LOCK:
                SUBS[c["sub"]].statuses = list(c["statuses"])
            return self.answer(204)
        if not self.path.startswith("/push/"):
            return self.answer(404)
        n = int(self.path[len("/push/"):])
        sub = SUBS[n]
        rec = {
            "sub": n,
            "ttl": self.headers.get("TTL"),
            "urgency": self.headers.get("Urgency"),
            "topic": self.headers.get("Topic"),
            "encoding": self.headers.get("Content-Encoding"),
        }
        status = 201
        try:
            if rec["ttl"] is None or not rec["ttl"].isdigit():
                raise ValueError("no TTL header")
            if rec["urgency"] not in (None, "very-low", "low", "normal", "high"):
                raise ValueError("Urgency %r is not RFC 8030's" % rec["urgency"])
            if rec["encoding"] != "aes128gcm":
                raise ValueError("Content-Encoding is %r" % rec["encoding"])
            claims, key = check_vapid(self.headers.get("Authorization", ""))
            rec["claims"] = claims
            rec["vapid_key"] = key
            plain = http_ece.decrypt(
                body, private_key=sub.key, auth_secret=sub.auth, version="aes128gcm"
            )
            rec["payload"] = json.loads(plain)
        except Exception as e:  # noqa: BLE001 - every failure is recorded with its reason
            rec["error"] = "%s: %s" % (type(e).__name__, e)
            status = 400
        with LOCK:
            if "error" not in rec and sub.statuses:
                status = sub.statuses.pop(0)
            rec["status"] = status
            RECEIVED.append(rec)
        self.answer(status)


def main():
    global ORIGIN
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    ORIGIN = "http://127.0.0.1:%d" % port
    for _ in range(n):
        SUBS.append(Subscription())
    subs = []
    for i, s in enumerate(SUBS):
        private = s.key.private_numbers().private_value.to_bytes(32, "big")
        subs.append(
            {
                "endpoint": "%s/push/%d" % (ORIGIN, i),
                "keys": {"p256dh": b64e(s.public()), "auth": b64e(s.auth)},
                "private": b64e(private),
            }
        )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"port": port, "subscriptions": subs}), flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
