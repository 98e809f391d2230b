# gnuplot curves.gp, in this folder, draws curves_steps.png, curves_active_layer_tokens.png, curves_steps.svg, curves_active_layer_tokens.svg
if (!exists("plot_0")) plot_0 = 'curves_steps.png'
if (!exists("plot_1")) plot_1 = 'curves_active_layer_tokens.png'
if (!exists("plot_2")) plot_2 = 'curves_steps.svg'
if (!exists("plot_3")) plot_3 = 'curves_active_layer_tokens.svg'
set datafile separator ','
set key outside right noenhanced
set grid
set ylabel 'validation CE (nats/byte)'
set terminal pngcairo size 1200,650
set output plot_0
set xlabel 'steps'
set title 'mean over 3 seeds, band = min..max'
unset arrow
set arrow from 6944, graph 0 to 6944, graph 1 nohead dt 2 lc 'gray'
set arrow from 13888, graph 0 to 13888, graph 1 nohead dt 2 lc 'gray'
plot 
set terminal pngcairo size 1200,650
set output plot_1
set xlabel 'active-layer tokens'
set title 'mean over 3 seeds, band = min..max'
unset arrow
plot 
set terminal svg size 1200,650
set output plot_2
set xlabel 'steps'
set title 'mean over 3 seeds, band = min..max'
unset arrow
set arrow from 6944, graph 0 to 6944, graph 1 nohead dt 2 lc 'gray'
set arrow from 13888, graph 0 to 13888, graph 1 nohead dt 2 lc 'gray'
plot 
set terminal svg size 1200,650
set output plot_3
set xlabel 'active-layer tokens'
set title 'mean over 3 seeds, band = min..max'
unset arrow
plot 
unset output
