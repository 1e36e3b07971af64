// SPDX-License-Identifier: MIT
// A Chainlink-style USD price feed (AggregatorV3Interface) for the development chain and the test suite.
// Anyone can set the answer: it only ever lives on a local anvil chain.
pragma solidity ^0.8.20;

contract DevPriceFeed {
    uint8 public immutable decimals;
    string public description;
    uint256 public constant version = 4;

    uint80 private _roundId;
    int256 private _answer;
    uint256 private _startedAt;
    uint256 private _updatedAt;
    uint80 private _answeredInRound;

    constructor(uint8 decimals_, string memory description_, int256 answer_) {
        decimals = decimals_;
        description = description_;
        setAnswer(answer_);
    }

    // A new, complete round answered now: what a healthy feed does.
    function setAnswer(int256 answer_) public {
        _roundId += 1;
        _answer = answer_;
        _startedAt = block.timestamp;
        _updatedAt = block.timestamp;
        _answeredInRound = _roundId;
    }

    // Any round at all, for tests: a stale one, an incomplete one, a negative answer.
    function setRoundData(uint80 roundId_, int256 answer_, uint256 startedAt_, uint256 updatedAt_, uint80 answeredInRound_)
        external
    {
        _roundId = roundId_;
        _answer = answer_;
        _startedAt = startedAt_;
        _updatedAt = updatedAt_;
        _answeredInRound = answeredInRound_;
    }

    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        return (_roundId, _answer, _startedAt, _updatedAt, _answeredInRound);
    }
}
