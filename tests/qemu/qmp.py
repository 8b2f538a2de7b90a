#!/usr/bin/python3
"""qmp.py SOCKET COMMAND_JSON: run one QMP command on a QEMU's QMP unix
socket (-qmp unix:SOCKET,server=on,wait=off) and print its reply's
"return" value as JSON; exit 1 with the error on an error reply.  Events
that arrive meanwhile are skipped.

qmp.py SOCKET --event NAME: wait for the event NAME and print the time
QEMU stamped it with, in milliseconds since the epoch."""
import json
import socket
import sys


def main():
    path, command = sys.argv[1], sys.argv[2]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        stream = sock.makefile("rw")
        stream.readline()  # greeting
        stream.write('{"execute": "qmp_capabilities"}\n')
        stream.flush()
        stream.readline()
        if command == "--event":
            while True:
                reply = json.loads(stream.readline())
                if reply.get("event") == sys.argv[3]:
                    stamp = reply["timestamp"]
                    print(stamp["seconds"] * 1000 +
                          stamp["microseconds"] // 1000)
                    return
        sock.settimeout(30)
        stream.write(command + "\n")
        stream.flush()
        while True:
            reply = json.loads(stream.readline())
            if "event" not in reply:
                break
        if "error" in reply:
            sys.exit(f"qmp.py: {command}: {reply['error'].get('desc')}")
        print(json.dumps(reply["return"]))


main()
