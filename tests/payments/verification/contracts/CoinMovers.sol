// SPDX-License-Identifier: MIT
// Every way a contract can move the native coin to an address, and reverted variants of each: the
// attacker's toolbox of tests/payments/verification/test_native_value_moves.py. Only ever deployed on a test anvil.
pragma solidity ^0.8.20;

/// Created with coin (CREATE or CREATE2 carrying value), its constructor sends the coin on to `to`.
contract PayOnCreate {
    constructor(address payable to) payable {
        (bool ok, ) = to.call{value: msg.value}("");
        require(ok, "payment failed");
    }
}

/// Created with coin, it self-destructs at once with `to` as the beneficiary: SELFDESTRUCT moves the coin.
contract PayOnSelfdestruct {
    constructor(address payable to) payable {
        selfdestruct(to);
    }
}

contract CoinMover {
    /// A CALL with value from a contract (a smart wallet, an exchange's batch).
    function forward(address payable to) public payable {
        (bool ok, ) = to.call{value: msg.value}("");
        require(ok, "forward failed");
    }

    /// Nested CALLs: this contract calls itself, and that frame forwards.
    function forwardNested(address payable to) external payable {
        this.forward{value: msg.value}(to);
    }

    function createPaying(address payable to) external payable {
        new PayOnCreate{value: msg.value}(to);
    }

    function create2Paying(address payable to, bytes32 salt) external payable {
        new PayOnCreate{value: msg.value, salt: salt}(to);
    }

    function selfdestructPaying(address payable to) external payable {
        new PayOnSelfdestruct{value: msg.value}(to);
    }

    /// DELEGATECALL and STATICCALL run code in this contract's context: they move no coin of their own.
    function delegateTo(address to) external payable {
        (bool ok, ) = to.delegatecall("");
        require(ok, "delegatecall failed");
    }

    function staticTo(address to) external payable {
        (bool ok, ) = to.staticcall("");
        require(ok, "staticcall failed");
    }

    // Each way above, then a revert: the coin moved inside a frame that is undone.
    function forwardThenRevert(address payable to) public payable {
        this.forward{value: msg.value}(to);
        revert("undone");
    }

    function forwardNestedThenRevert(address payable to) external payable {
        this.forwardThenRevertCaught{value: msg.value}(to);
        revert("undone");
    }

    /// Its own frame succeeds (the inner revert is caught), but the caller reverts it: an ancestor two up.
    function forwardThenRevertCaught(address payable to) external payable {
        this.forward{value: msg.value}(to);
    }

    function createThenRevert(address payable to) external payable {
        new PayOnCreate{value: msg.value}(to);
        revert("undone");
    }

    function create2ThenRevert(address payable to, bytes32 salt) external payable {
        new PayOnCreate{value: msg.value, salt: salt}(to);
        revert("undone");
    }

    function selfdestructThenRevert(address payable to) external payable {
        new PayOnSelfdestruct{value: msg.value}(to);
        revert("undone");
    }

    /// The transaction succeeds, but the frame that paid was reverted and its revert caught (try/catch):
    /// `how` picks which of the reverting functions above runs inside the try.
    function tryAndCatch(address payable to, uint8 how) external payable {
        if (how == 0) {
            try this.forwardThenRevert{value: msg.value}(to) {} catch {}
        } else if (how == 1) {
            try this.forwardNestedThenRevert{value: msg.value}(to) {} catch {}
        } else if (how == 2) {
            try this.createThenRevert{value: msg.value}(to) {} catch {}
        } else if (how == 3) {
            try this.create2ThenRevert{value: msg.value}(to, bytes32(uint256(7))) {} catch {}
        } else {
            try this.selfdestructThenRevert{value: msg.value}(to) {} catch {}
        }
    }

    receive() external payable {}
}
