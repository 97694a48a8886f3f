"""``smroute check-config FILE [--json]``: validate a daemon config file.

Prints the effective configuration (every key, defaults filled in, relative
paths resolved) and any warnings; on a bad file prints the error naming the
file, line, key path and what was expected.  Exit 0 valid, 2 invalid.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register", "cmd_check_config"]


def register(subparsers: Any) -> None:
    """Add the ``check-config`` command to ``subparsers``."""
    p = subparsers.add_parser(
        "check-config",
        help="validate a daemon config file and print the effective config (exit 0 ok, 2 bad)",
        description="Validate a smroute daemon YAML config: unknown keys, bad values, "
        "missing files (fabric, TLS certificates and keys) and insecure combinations are "
        "reported with the file, line and key path; TLS keys must match their certificates "
        "and certificates must be within their validity dates. Prints the effective config with "
        "defaults filled in, and warnings. Exit status: 0 valid, 2 invalid.",
    )
    p.add_argument("config", metavar="FILE", help="YAML config file (see deploy/smroute.yaml)")
    p.add_argument("--json", action="store_true",
                   help="print {ok, source, config, warnings} or {ok, source, error, key, line} "
                   "as JSON")
    p.add_argument("--no-file-check", action="store_true",
                   help="do not require the files the config names to exist (e.g. when "
                   "checking a config for another machine)")
    p.set_defaults(func=cmd_check_config)


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate ``args.config``; print the effective config; 0 if valid."""
    import yaml

    from smroute.service.config import ConfigError, config_to_dict, load_config

    try:
        cfg = load_config(args.config, check_files=not args.no_file_check)
    except ConfigError as err:
        if not args.json:
            raise
        doc = {"ok": False, "source": args.config, "error": str(err), "key": err.key,
               "line": err.line}
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return err.exit_code
    warnings = list(cfg.warnings())
    if cfg.tls is not None and not args.no_file_check:
        from smroute.service.auth import check_tls

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
