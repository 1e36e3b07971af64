"""The fit advisor's page (/advisor/, a GET form rendered on the server) and its API (/api/v1/advisor/).

Both check the same limits and call shop.advisor for the estimate; nothing is stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload

from django import forms
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_errors import BAD_INPUT, BODY_READ, documented
from orders.models import LotSpec
from shop.advice import advice_for_current_lot
from shop.advisor import (
    LIMITS,
    Advice,
    AdvisorInputError,
    FitRequest,
    Optimizer,
    ParameterUnit,
    Precision,
    Strategy,
    Verdict,
    check_limit,
    parse_parameter_count,
)

DEFAULTS = FitRequest(parameters=0)  # the defaults of every input but the size
INTEGER_FIELDS = ("sequence_length", "micro_batch_size", "hidden_size", "layers")


def order_path(lots: int | None) -> str | None:
    """The order wizard with the recommended lots prefilled."""
    return f"{reverse('shop:order_configure')}?lots={lots}" if lots else None


def _number_input(field: str) -> forms.NumberInput:
    low, high = LIMITS[field]
    return forms.NumberInput(attrs={"min": low, "max": high, "inputmode": "numeric"})


class AdvisorForm(forms.Form):
    parameters = forms.CharField(
        label=_("Model size (parameters)"),
        max_length=40,
        help_text=_("For example 7B, 350M, 1.5T or 70e9. A plain number is read in the unit below."),
        widget=forms.TextInput(attrs={"spellcheck": "false", "autocomplete": "off", "autocapitalize": "off"}),
    )
    parameters_unit = forms.ChoiceField(
        label=_("Unit of a plain number"),
        choices=ParameterUnit.choices,
        initial=ParameterUnit.BILLIONS,
        widget=forms.Select(attrs={"class": "input"}),
    )
    precision = forms.ChoiceField(
        label=_("Training precision"),
        help_text=_(
            "It sets the bytes per parameter of the weights and gradients, and whether an FP32 master copy is kept."
        ),
        choices=Precision.choices,
        initial=DEFAULTS.precision,
        widget=forms.RadioSelect,
    )
    optimizer = forms.ChoiceField(
        label=_("Optimizer"),
        help_text=_("It sets the optimizer state kept for each parameter."),
        choices=Optimizer.choices,
        initial=DEFAULTS.optimizer,
        widget=forms.RadioSelect,
    )
    sequence_length = forms.IntegerField(
        label=_("Sequence length (tokens)"), initial=DEFAULTS.sequence_length, widget=_number_input("sequence_length")
    )
    micro_batch_size = forms.IntegerField(
        label=_("Micro-batch size per card"),
        initial=DEFAULTS.micro_batch_size,
        help_text=_("Sequences each card processes in one forward and backward pass."),
        widget=_number_input("micro_batch_size"),
    )
    hidden_size = forms.IntegerField(
        label=_("Hidden size (optional)"),
        required=False,
        help_text=_("Leave empty to derive it from the parameter count."),
        widget=_number_input("hidden_size"),
    )
    layers = forms.IntegerField(
        label=_("Layers (optional)"),
        required=False,
        help_text=_("Leave empty to derive it from the parameter count."),
        widget=_number_input("layers"),
    )
    activation_checkpointing = forms.BooleanField(
        label=_("Activation checkpointing"),
        required=False,
        help_text=_(
            "Recompute activations during the backward pass instead of keeping them: less memory, more compute."
        ),
    )
    strategy = forms.ChoiceField(
        label=_("How the cards share the model"),
        help_text=_(
            "Data parallel keeps a full copy of the model on each card; sharding splits the weights, gradients "
            "and optimizer state across the cards."
        ),
        choices=Strategy.choices,
        initial=DEFAULTS.strategy,
        widget=forms.RadioSelect,
    )

    def _check(self, field: str) -> int | None:
        value = self.cleaned_data.get(field)
        if value is None:
            return None
        try:
            return check_limit(field, value)
        except AdvisorInputError as exc:
            raise forms.ValidationError(exc.message) from None

    def clean_sequence_length(self) -> int | None:
        return self._check("sequence_length")

    def clean_micro_batch_size(self) -> int | None:
        return self._check("micro_batch_size")

    def clean_hidden_size(self) -> int | None:
        return self._check("hidden_size")

    def clean_layers(self) -> int | None:
        return self._check("layers")

    def clean(self) -> dict[str, Any] | None:
        data = super().clean()
        if data is not None and "parameters" in data:
            try:
                data["parameter_count"] = parse_parameter_count(
                    data["parameters"], data.get("parameters_unit") or ParameterUnit.BILLIONS
                )
            except AdvisorInputError as exc:
                self.add_error("parameters", exc.message)
        return data

    def fit_request(self) -> FitRequest:
        data = self.cleaned_data
        return FitRequest(
            parameters=data["parameter_count"],
            precision=data["precision"],
            optimizer=data["optimizer"],
            sequence_length=data["sequence_length"],
            micro_batch_size=data["micro_batch_size"],
            hidden_size=data.get("hidden_size"),
            layers=data.get("layers"),
            activation_checkpointing=data["activation_checkpointing"],
            strategy=data["strategy"],
        )


def _with_defaults(query: QueryDict) -> QueryDict:
    """A link may carry only some inputs (`?parameters=13B`): the others take the form's initial values.
    A field sent empty stays empty, and is reported."""
    data = query.copy()
    for name, field in AdvisorForm.base_fields.items():
        if name not in data and field.initial is not None and not isinstance(field, forms.BooleanField):
            data[name] = str(field.initial)
    return data


@require_GET
def advisor(request: HttpRequest) -> HttpResponse:
    """The form, and once it is sent (GET ?parameters=...), the estimate with its formulas and verdict."""
    form = AdvisorForm(_with_defaults(request.GET) if "parameters" in request.GET else None)
    advice = advice_for_current_lot(form.fit_request()) if form.is_bound and form.is_valid() else None
    notice_classes: dict[str | None, str] = {
        Verdict.FITS_ONE_CARD: "notice--success",
        Verdict.NEEDS_PAIR_SHARDED: "",
        Verdict.DOES_NOT_FIT_PAIR: "notice--warning",
    }
    context = {
        "form": form,
        "lot": LotSpec.current(),
        "advice": advice,
        "order_path": order_path(advice.lots) if advice else None,
        "notice_class": notice_classes.get(advice.verdict if advice else None, ""),
    }
    return render(request, "shop/advisor.html", context)


class LimitedIntegerField(serializers.IntegerField):
    """An integer whose schema documents LIMITS[limit]; validate_<field> checks it, in the advisor's own words."""

    def __init__(self, limit: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.min_value, self.max_value = LIMITS[limit]  # for the schema only: no DRF validator, no second message


class AdvisorInput(serializers.Serializer[Mapping[str, object]]):
    parameters = serializers.CharField(
        max_length=40, help_text="Model size: 7B, 350M, 1.5T, 70e9, or a number (read in parameters_unit)."
    )
    parameters_unit = serializers.ChoiceField(choices=ParameterUnit.choices, default=ParameterUnit.PARAMETERS)
    precision = serializers.ChoiceField(choices=Precision.choices, default=DEFAULTS.precision)
    optimizer = serializers.ChoiceField(choices=Optimizer.choices, default=DEFAULTS.optimizer)
    sequence_length = LimitedIntegerField("sequence_length", default=DEFAULTS.sequence_length)
    micro_batch_size = LimitedIntegerField("micro_batch_size", default=DEFAULTS.micro_batch_size)
    hidden_size = LimitedIntegerField(
        "hidden_size", required=False, allow_null=True, help_text="Derived from P when absent."
    )
    layers = LimitedIntegerField("layers", required=False, allow_null=True, help_text="Derived from P when absent.")
    activation_checkpointing = serializers.BooleanField(default=False)
    strategy = serializers.ChoiceField(choices=Strategy.choices, default=DEFAULTS.strategy)

    def validate_parameters(self, value: str) -> int:
        unit = str(self.initial_data.get("parameters_unit") or ParameterUnit.PARAMETERS)
        try:
            return parse_parameter_count(value, unit if unit in ParameterUnit.values else ParameterUnit.PARAMETERS)
        except AdvisorInputError as exc:
            raise serializers.ValidationError(exc.message) from None

    @overload
    def _check(self, field: str, value: int) -> int: ...
    @overload
    def _check(self, field: str, value: int | None) -> int | None: ...
    def _check(self, field: str, value: int | None) -> int | None:
        if value is None:
            return None
        try:
            return check_limit(field, value)
        except AdvisorInputError as exc:
            raise serializers.ValidationError(exc.message) from None

    def validate_sequence_length(self, value: int) -> int:
        return self._check("sequence_length", value)

    def validate_micro_batch_size(self, value: int) -> int:
        return self._check("micro_batch_size", value)

    def validate_hidden_size(self, value: int | None) -> int | None:
        return self._check("hidden_size", value)

    def validate_layers(self, value: int | None) -> int | None:
        return self._check("layers", value)

    def fit_request(self) -> FitRequest:
        data = dict(self.validated_data)
        data.pop("parameters_unit", None)
        return FitRequest(**data)


class AdvisorOutput(serializers.Serializer[Mapping[str, object]]):
    class PerCard(serializers.Serializer[Mapping[str, object]]):
        weights = serializers.FloatField()
        gradients = serializers.FloatField()
        optimizer = serializers.FloatField()
        activations = serializers.FloatField()
        overhead = serializers.FloatField()
        total = serializers.FloatField()

    class Totals(serializers.Serializer[Mapping[str, object]]):
        data_parallel = serializers.FloatField(help_text="GB per card with a full copy on each card")
        sharded = serializers.FloatField(help_text="GB per card sharded across the lot's cards")

    class Model(serializers.Serializer[Mapping[str, object]]):
        parameters = serializers.IntegerField()
        hidden_size = serializers.IntegerField()
        layers = serializers.IntegerField()
        hidden_size_derived = serializers.BooleanField()
        layers_derived = serializers.BooleanField()

    per_card_gb = PerCard(help_text="GB per card for the strategy asked for")
    strategy = serializers.ChoiceField(choices=Strategy.choices)
    totals_gb = Totals()
    card_memory_gb = serializers.IntegerField(help_text="Memory of each card of a lot (not pooled)")
    usable_gb_per_card = serializers.FloatField()
    verdict = serializers.ChoiceField(choices=Verdict.choices)
    title = serializers.CharField()
    message = serializers.CharField()
    formulas = serializers.ListField(child=serializers.CharField())
    notes = serializers.ListField(child=serializers.CharField())
    model = Model()
    lots = serializers.IntegerField(allow_null=True, help_text="Lots to order; null when a lot cannot hold it")
    order_url = serializers.URLField(allow_null=True, help_text="The order form with the lots prefilled")


def advice_representation(advice: Advice, request: HttpRequest) -> dict[str, Any]:
    path = order_path(advice.lots)
    return {
        "per_card_gb": advice.per_card.as_dict(),
        "strategy": advice.request.strategy,
        "totals_gb": {"data_parallel": round(advice.one_copy.total, 2), "sharded": round(advice.sharded.total, 2)},
        "card_memory_gb": advice.card_memory_gb,
        "usable_gb_per_card": round(advice.usable_gb, 2),
        "verdict": advice.verdict,
        "title": advice.title,
        "message": advice.message,
        "formulas": advice.formulas,
        "notes": advice.notes,
        "model": {
            "parameters": advice.request.parameters,
            "hidden_size": advice.shape.hidden_size,
            "layers": advice.shape.layers,
            "hidden_size_derived": advice.shape.hidden_derived,
            "layers_derived": advice.shape.layers_derived,
        },
        "lots": advice.lots,
        "order_url": request.build_absolute_uri(path) if path else None,
    }


class AdvisorApi(APIView):
    """How much memory each card needs for a training, and whether one lot holds it. Stores nothing."""

    @extend_schema(
        request=AdvisorInput,
        examples=[OpenApiExample("13B, sharded", {"parameters": "13B", "strategy": "sharded"}, request_only=True)],
        responses=documented({200: AdvisorOutput}, BODY_READ),
        summary="Estimate the memory per card",
    )
    def post(self, request: Request) -> Response:
        return self._advise(request, request.data)

    @extend_schema(
        parameters=[AdvisorInput],
        responses={200: AdvisorOutput, 400: BAD_INPUT},
        summary="The same, from query params",
    )
    def get(self, request: Request) -> Response:
        return self._advise(request, request.query_params)

    def _advise(self, request: Request, data: Mapping[str, object]) -> Response:
        serializer = AdvisorInput(data=data)
        if not serializer.is_valid():
            return Response(serializer.errors, status=status.HTTP_400_BAD_REQUEST)
        advice = advice_for_current_lot(serializer.fit_request())
        return Response(AdvisorOutput(advice_representation(advice, request)).data)
