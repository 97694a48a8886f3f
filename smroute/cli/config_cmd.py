"""``smroute check-config FILE [--json]``: validate a daemon config file.

Prints the effective configuration (every key, defaults filled in, relative
paths resolved) and any warnings; on a bad file prints every error, each naming
the file, line, key path and what was expected.  The fabric the config names is
parsed as the daemon would at start (a fabric that does not parse is an error
naming the fabric file's line and the config's ``fabric`` key).  Exit 0
valid, 2 invalid.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from smroute.text import printable

__all__ = ["register", "cmd_check_config"]


def register(subparsers: Any) -> None:
    """Add the ``check-config`` command to ``subparsers``."""
    p = subparsers.add_parser(
        "check-config",
        help="validate a daemon config file and print the effective config (exit 0 ok, 2 bad)",
        description="Validate a smroute daemon YAML config: unknown keys, bad values, "
        "missing files (fabric, TLS certificates and keys), a fabric that does not parse and "
        "insecure combinations are "
        "reported with the file, line and key path; TLS keys must match their certificates "
        "and certificates must be within their validity dates. Every error is reported in "
        "one run. Prints the effective config with "
        "defaults filled in, and warnings. Exit status: 0 valid, 2 invalid.",
    )
    p.add_argument("config", metavar="FILE", help="YAML config file (see deploy/smroute.yaml)")
    p.add_argument("--json", action="store_true",
                   help="print {ok, source, config, warnings} or {ok, source, error, key, line, "
                   "errors} as JSON (errors: every error, each {error, key, line})")
    p.add_argument("--no-file-check", action="store_true",
                   help="do not require the files the config names to exist (e.g. when "
                   "checking a config for another machine)")
    p.set_defaults(func=cmd_check_config)


def _key_line(config: str, key: str) -> int | None:
    """Line of the top-level ``key:`` in the YAML file ``config`` (if found)."""
    pattern = re.compile(rf"^{re.escape(key)}\s*:")
    try:
        text = Path(config).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return next((no for no, line in enumerate(text.splitlines(), 1) if pattern.match(line)),
                None)


def check_fabric(fabric: Path, config: str) -> None:
    """Parse the ``fabric`` the config names, as the daemon does at start
    (:func:`smroute.cli.inputs.load_fabric`); a
    :class:`~smroute.service.config.ConfigError` on key ``fabric`` (the
    config's line) quoting the fabric file's own error (its line) if it
    cannot be read or parsed, or is no regular file."""
    from smroute.cli.inputs import load_fabric, require_regular_file
    from smroute.errors import InputError
    from smroute.service.config import ConfigError

    try:
        require_regular_file(fabric, "fabric")
        load_fabric(str(fabric))
    except InputError as err:
        raise ConfigError(f"the fabric cannot be loaded: {err}", key="fabric", source=config,
                          line=_key_line(config, "fabric")) from None


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate ``args.config``; print the effective config; 0 if valid.

    Every error is reported in one run (key path and line of each)."""
    import yaml

    from smroute.service.config import ConfigError, check_config, config_to_dict

    cfg, errors = check_config(args.config, check_files=not args.no_file_check)
    if (cfg is not None and cfg.fabric is not None and not args.no_file_check
            and not any(e.key == "fabric" for e in errors)):
        try:
            check_fabric(cfg.fabric, args.config)
        except ConfigError as err:
            errors.append(err)
    if errors:
        errors.sort(key=lambda e: (e.line is None, e.line or 0))  # file order
        if args.json:
            first = errors[0]
            doc = {"ok": False, "source": args.config, "error": str(first), "key": first.key,
                   "line": first.line,
                   "errors": [{"error": str(e), "key": e.key, "line": e.line} for e in errors]}
            json.dump(doc, sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            for e in errors:
                print(f"smroute: error: {printable(str(e))}", file=sys.stderr)
            if len(errors) > 1:
                print(f"smroute: {printable(args.config)}: {len(errors)} errors",
                      file=sys.stderr)
        return 2
    assert cfg is not None
    warnings = list(cfg.warnings())
    if cfg.tls is not None and not args.no_file_check:
        from smroute.service.rpc.auth import check_tls

        warnings += check_tls(cfg.tls)  # load_config already raised for unusable files
    data = config_to_dict(cfg)
    if args.json:
        json.dump({"ok": True, "source": args.config, "config": data, "warnings": warnings},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    for w in warnings:
        print(f"smroute: warning: {w}", file=sys.stderr)
    sys.stdout.write(f"# {args.config}: valid; effective configuration:\n")
    sys.stdout.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    return 0
