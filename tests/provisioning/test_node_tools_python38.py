"""The node tools run with the node's own Python, which may be as old as 3.8."""

from __future__ import annotations

import ast

import pytest

from provisioning import node_tools


@pytest.mark.parametrize("path", sorted(node_tools.DIRECTORY.glob("*.py")), ids=lambda path: path.name)
def test_a_node_tool_parses_as_python_3_8(path):
    # A 3.9+ construct (a parenthesised `with`, `match`, `except*`...) is a syntax error on such a node.
    ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))
